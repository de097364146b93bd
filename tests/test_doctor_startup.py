"""doctor asks the release's own start-up configuration (issue 53): vLLM's ``create_engine_config``
on the parsed line, in the release's interpreter.

A field-report failure class: a line the parser takes and the server refuses seconds after start,
in words doctor had no rule for (a speculative config without its token count, a draft
tensor-parallel size the release does not take, a key it does not know). No rule of ours is
asserted here: the refusal's words are the release's, and a line it accepts says what it resolved.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from patcher.cli.main import main
from patcher.environment import engines
from patcher.maintainer import cpu_env
from patcher.release import release_parser
from patcher.release.launch_command import parse
from tests.support import progress
from tests.support import real_drafters as rd

pytestmark = [pytest.mark.wheels, pytest.mark.cpuenv]

# The default tier's vLLM (the loader test's release: its environment is built once for both);
# the release of the field report's vLLM launches in --full.
RELEASES = [pytest.param("0.34.0"), pytest.param("0.22.1", marks=pytest.mark.full)]


def _doctor(python: Path, *line: str) -> tuple[int, dict]:
    out = io.StringIO()
    code = main(["doctor", "--json", "--python", str(python), "--", *line], out=out, err=io.StringIO())
    return code, json.loads(out.getvalue())


@pytest.mark.parametrize("version", RELEASES)
def test_the_release_s_start_up_refusals_are_no_go_in_its_own_words(tmp_path: Path, version: str) -> None:
    target = rd.kimi_target(tmp_path, "kimi-k2", k25=False)
    drafter = rd.specforge_kimi(tmp_path)

    def line(**spec: object) -> list[str]:
        return ["vllm", "serve", str(target), "-tp", "8", "--speculative-config",
                json.dumps({"method": "eagle3", "model": str(drafter), **spec})]

    refused = {  # what the release's words name, each line otherwise the accepted one
        "no token count": (line(), "num_speculative_tokens"),
        "draft TP 2 at TP 8": (line(num_speculative_tokens=3, draft_tensor_parallel_size=2), "tensor_parallel"),
        "a key it does not know": (line(num_speculative_tokens=3, draft_layers=2), "draft_layers"),
    }
    with cpu_env.using("vllm", version, log=progress.say) as python:
        # the four lines in one interpreter (doctor then finds each parse cached): one engine import
        install = engines.find_first(["vllm"], python=str(python))[0]
        assert install is not None
        lines = [line(num_speculative_tokens=3), *(words for words, _ in refused.values())]
        release_parser.read_many([parse(words) for words in lines], install)
        code, doc = _doctor(python, *line(num_speculative_tokens=3))
        said = {f["code"]: f for f in doc["findings"]}
        assert said["launch.parse"]["level"] == "ok"
        assert said["launch.startup"]["level"] == "ok", said["launch.startup"]
        assert said["launch.startup"]["message"].endswith(f"speculative method eagle3, 3 token(s), draft {drafter}")
        assert "keys.load" in said, "an accepted line goes on to the drafter check"
        wrong = []
        for name, (words, named) in refused.items():
            code, doc = _doctor(python, *words)
            found = {f["code"]: f for f in doc["findings"]}
            f = found.get("launch.startup", {})
            if (code, f.get("level")) != (1, "problem") or named not in f.get("found", ""):
                wrong.append(f"{name}: exit {code}, {f}")
            elif "keys.load" in found:  # the server stops before it loads anything: no drafter verdict
                wrong.append(f"{name}: judged the drafter of a line that stops at start-up")
        assert not wrong, "\n".join(wrong)
