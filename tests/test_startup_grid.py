"""doctor agrees with the release's own start-up configuration on launches generated from the
release (issue 53). vLLM: every speculative method its ``SpeculativeConfig`` names, with and without
a draft model, and every field it declares given a value of the wrong kind (tests/support/
startup_oracle.py generates them in the release's interpreter and builds each through the Python
API, ``EngineArgs(...).create_engine_config()``). SGLang: every speculative algorithm its parser or
registry names, with and without a draft model, and every other speculative option its parser
declares given values its type takes (startup_oracle_sglang.py: ``ServerArgs(...)``, on a stand-in
GPU of its own). doctor reads each as a command line, through the
release's CLI parser and its child, many lines in one interpreter (a line's state must not leak into
the next): refused (by the parser or the start-up) exactly where the release refuses, and the
method it resolved where it accepts.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from patcher.environment import engines
from patcher.release import release_parser
from patcher.release.launch_command import parse
from tests.support import progress, recorded, tiers
from tests.support import real_drafters as rd

pytestmark = [pytest.mark.wheels, pytest.mark.cpuenv]

ORACLE = Path(__file__).parent / "support" / "startup_oracle.py"
ORACLE_SGLANG = Path(__file__).parent / "support" / "startup_oracle_sglang.py"
MARK = "@@startup@@ "
# The default tier's releases (tests/support/tiers.py: the newest of each CPU env line, already swapped
# in for its other tests) and, in --full, releases spread over both engines' lines.
def _releases(engine: str, *versions: str) -> list:
    return [pytest.param(v, marks=() if (engine, v) in tiers.SAMPLE else (pytest.mark.full,), id=v) for v in versions]


# vLLM 0.11.1 and 0.15.1 agree too (6 December), but build each case in 4-5 s (254 s and 310 s in
# the clean-clone CI run): CI's budget keeps them out.
RELEASES = _releases("vllm", "0.34.0", "0.19.1", "0.29.0", "0.22.1")
SGLANG = _releases("sglang", "0.5.23", "0.5.9", "0.5.20", "0.5.13.post1", "0.5.4")


def _target(root: Path) -> Path:
    """Kimi-K2's config under DeepSeek-V3's model type, which every line's transformers reads (Kimi-K2's
    own, kimi_k2, needs the checkpoint's remote code there, and the start-up refuses it without)."""
    target = rd.kimi_target(root, "kimi-k2", k25=False)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "model_type": "deepseek_v3"}))
    return target


def _oracle(python: Path, script: Path, request: dict, cwd: Path) -> list[dict]:
    from patcher.maintainer import cpu_env

    proc = subprocess.run([str(python), str(script)], input=json.dumps(request), capture_output=True, text=True,
                          timeout=1200, env={**cpu_env.probe_env(), **recorded.ORACLE_ENV}, cwd=cwd)
    truth = [json.loads(ln[len(MARK):]) for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    assert truth, proc.stderr[-3000:]
    return truth


def _truth(install, script: Path, request: dict, version: str, cwd: Path) -> list[dict]:
    """The oracle's answer, recorded per input (``recorded.truth``); the default tier's releases
    compute it afresh and compare it with the record."""
    fresh = (install.engine, version) in tiers.SAMPLE
    inputs = [script.read_text(), json.dumps(request, sort_keys=True), *recorded.release_parts(install)]
    return recorded.truth(f"startup-{install.engine}", inputs,
                          lambda: _oracle(Path(install.python), script, request, cwd),
                          fresh=fresh)


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

    target, drafter = recorded.settled_paths(tmp_path, _target, rd.speculators_kimi)
    with cpu_env.using("vllm", version, log=progress.say) as python:
        install = engines.find_first(["vllm"], python=str(python))[0]
        assert install is not None
        truth = _truth(install, ORACLE, {"target": str(target), "drafter": str(drafter)}, version, tmp_path)
        runners = [t for t in truth if "runner_env" in t]
        truth = [t for t in truth if "spec" in t]
        assert len(truth) > 40  # every method twice, every field once
        lines = [parse(["vllm", "serve", str(target), "-tp", "8", "--speculative-config", json.dumps(t["spec"])])
                 for t in truth]
        eagle3 = json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})
        lines += [parse([*([f"VLLM_USE_V2_MODEL_RUNNER={t['runner_env']}"] if t["runner_env"] else []),
                         "vllm", "serve", str(target), "-tp", "4", "--speculative-config", eagle3]) for t in runners]
        unset = {k: v for k, v in os.environ.items() if k != "VLLM_USE_V2_MODEL_RUNNER"}  # as the oracle starts
        read = release_parser.read_many(lines, install, environ=unset)
    read, picked = read[:len(truth)], read[len(truth):]
    # The runner doctor judges is the one the release's start-up picks for the launch's environment.
    built = [(t, reading.startup or {}) for t, (_, reading) in zip(runners, picked) if t["status"] == "configured"]
    assert built, runners
    assert [t["status"] == "configured" for t in runners] == [
        (reading.startup or {}).get("status") == "configured" for _, reading in picked]
    said = [(t["runner_env"], got.get("runner"), got.get("runner_error")) for t, got in built]
    assert said == [(t["runner_env"], t["runner"], None) for t, _ in built], said
    wrong = _disagreements(truth, read, lambda t: json.dumps(t["spec"]))
    refused = sum(t["status"] == "refused" for t in truth)
    assert refused and refused < len(truth), "the generated cases hold both outcomes"
    assert not wrong, f"{len(wrong)} of {len(truth)} disagree:\n" + "\n".join(wrong)


@pytest.mark.parametrize("version", SGLANG)
def test_doctor_refuses_exactly_what_sglang_s_start_up_refuses(tmp_path: Path, version: str) -> None:
    from patcher.maintainer import cpu_env

    target, drafter = recorded.settled_paths(tmp_path, _target, rd.specforge_kimi)
    with cpu_env.using("sglang", version, log=progress.say) as python:
        install = engines.find_first(["sglang"], python=str(python))[0]
        assert install is not None
        truth = _truth(install, ORACLE_SGLANG, {"target": str(target), "drafter": str(drafter)}, version, tmp_path)
        lines = [parse(["python", "-m", "sglang.launch_server", "--model-path", str(target), "--tp", "8",
                        "--speculative-algorithm", t["algorithm"],
                        *(["--speculative-draft-model-path", str(drafter)] if t["draft"] else []),
                        *([t["option"]] if "option" in t else []),
                        *([t["value"]] if t.get("value") is not None else [])]) for t in truth]
        read = release_parser.read_many(lines, install)
    wrong = _disagreements(truth, read, lambda t: f"{t['algorithm']} {'with' if t['draft'] else 'without'} a draft"
                           + (f" {t['option']} {t.get('value') or ''}" if "option" in t else ""))
    assert {"EAGLE3", "NEXTN"} <= {t["algorithm"] for t in truth}
    assert "configured" in {t["status"] for t in truth}
    options = [t for t in truth if "option" in t]  # the other speculative options, generated from the parser
    assert len({t["option"] for t in options}) >= 3 and "refused" in {t["status"] for t in options}
    assert not wrong, f"{len(wrong)} of {len(truth)} disagree:\n" + "\n".join(wrong)
