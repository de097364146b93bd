"""doctor agrees with the release's own start-up configuration on launches generated from the
release (issue 53). vLLM: every speculative method its ``SpeculativeConfig`` names, with and without
a draft model, and every field it declares given a value of the wrong kind (tests/support/
startup_oracle.py generates them in the release's interpreter and builds each through the Python
API, ``EngineArgs(...).create_engine_config()``). SGLang: every speculative algorithm its parser or
registry names, with and without a draft model (startup_oracle_sglang.py: ``ServerArgs(...)``, on a
stand-in GPU of its own). doctor reads each as a command line, through the
release's CLI parser and its child, many lines in one interpreter (a line's state must not leak into
the next): refused (by the parser or the start-up) exactly where the release refuses, and the
method it resolved where it accepts.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from patcher.environment import engines
from patcher.release import release_parser
from patcher.release.launch_command import parse
from tests.support import progress
from tests.support import real_drafters as rd

pytestmark = [pytest.mark.wheels, pytest.mark.cpuenv]

ORACLE = Path(__file__).parent / "support" / "startup_oracle.py"
ORACLE_SGLANG = Path(__file__).parent / "support" / "startup_oracle_sglang.py"
MARK = "@@startup@@ "
RELEASES = [pytest.param("0.34.0"), pytest.param("0.22.1", marks=pytest.mark.full)]
SGLANG = [pytest.param("0.5.23"), pytest.param("0.5.13.post1", marks=pytest.mark.full)]


def _oracle(python: Path, script: Path, request: dict, cwd: Path) -> list[dict]:
    from patcher.maintainer import cpu_env

    proc = subprocess.run([str(python), str(script)], input=json.dumps(request), capture_output=True, text=True,
                          timeout=1200, env=cpu_env.probe_env(), cwd=cwd)
    truth = [json.loads(ln[len(MARK):]) for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    assert truth, proc.stderr[-3000:]
    return truth


def _disagreements(truth: list[dict], read: list, name) -> list[str]:
    wrong = []
    for t, (_, reading) in zip(truth, read):
        startup = reading.startup or {}
        said = ("refused" if reading.status == "rejected" or startup.get("status") == "refused" else
                startup.get("status", reading.status))
        if said != t["status"] or (said == "configured" and startup.get("method") != t["method"]):
            wrong.append(f"{name(t)}: the release {t['status']} {t.get('method') or t.get('error', '')}"
                         f"; doctor {said} {startup.get('method') or startup.get('error') or reading.error}")
    return wrong


@pytest.mark.parametrize("version", RELEASES)
def test_doctor_refuses_exactly_what_vllm_s_start_up_refuses(tmp_path: Path, version: str) -> None:
    from patcher.maintainer import cpu_env

    target = rd.kimi_target(tmp_path, "kimi-k2", k25=False)
    drafter = rd.speculators_kimi(tmp_path)
    with cpu_env.using("vllm", version, log=progress.say) as python:
        truth = _oracle(python, ORACLE, {"target": str(target), "drafter": str(drafter)}, tmp_path)
        assert len(truth) > 40  # every method twice, every field once
        install = engines.find_first(["vllm"], python=str(python))[0]
        assert install is not None
        lines = [parse(["vllm", "serve", str(target), "-tp", "8", "--speculative-config", json.dumps(t["spec"])])
                 for t in truth]
        read = release_parser.read_many(lines, install)
    wrong = _disagreements(truth, read, lambda t: json.dumps(t["spec"]))
    refused = sum(t["status"] == "refused" for t in truth)
    assert refused and refused < len(truth), "the generated cases hold both outcomes"
    assert not wrong, f"{len(wrong)} of {len(truth)} disagree:\n" + "\n".join(wrong)


@pytest.mark.parametrize("version", SGLANG)
def test_doctor_refuses_exactly_what_sglang_s_start_up_refuses(tmp_path: Path, version: str) -> None:
    from patcher.maintainer import cpu_env

    target = rd.kimi_target(tmp_path, "kimi-k2", k25=False)
    drafter = rd.specforge_kimi(tmp_path)
    with cpu_env.using("sglang", version, log=progress.say) as python:
        truth = _oracle(python, ORACLE_SGLANG, {"target": str(target), "drafter": str(drafter)}, tmp_path)
        install = engines.find_first(["sglang"], python=str(python))[0]
        assert install is not None
        lines = [parse(["python", "-m", "sglang.launch_server", "--model-path", str(target), "--tp", "8",
                        "--speculative-algorithm", t["algorithm"],
                        *(["--speculative-draft-model-path", str(drafter)] if t["draft"] else [])]) for t in truth]
        read = release_parser.read_many(lines, install)
    wrong = _disagreements(truth, read, lambda t: f"{t['algorithm']} {'with' if t['draft'] else 'without'} a draft")
    assert {"EAGLE3", "NEXTN"} <= {t["algorithm"] for t in truth}
    assert "configured" in {t["status"] for t in truth}
    assert not wrong, f"{len(wrong)} of {len(truth)} disagree:\n" + "\n".join(wrong)
