"""The README's main command: a real published release, patched in its CPU import environment,
ends in passing probes (patcher/maintainer/demo.py), with a timed line per slow step."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from patcher.maintainer import demo
from tests.support.probe_ids import expected

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_main_command() -> list[str]:
    """The arguments the README's first command passes to patcher.maintainer.demo."""
    section = README.read_text().split("## The two commands", 1)[1]
    first = re.search(r"```sh\n(.+?)\n```", section, re.S)
    assert first, "no command under 'The two commands'"
    words = shlex.split(first.group(1).split("&&")[-1])
    assert words[1:3] == ["-m", "patcher.maintainer.demo"], words
    return words[3:]


def test_readme_main_command_parses():
    ns = demo.parser().parse_args(readme_main_command())
    assert (ns.engine, ns.version) == ("sglang", "0.5.9")


@pytest.mark.full
@pytest.mark.cpuenv
def test_readme_main_command_ends_in_passing_probes():
    ns = demo.parser().parse_args(readme_main_command())
    lines: list[str] = []
    code = demo.prove(ns.engine, ns.version, keep=False, say=lines.append)
    text = "\n".join(lines)
    assert code == 0, text
    ran = dict(re.findall(r"^\s+probe (\S+): (.*)$", text.split("patcher verify", 1)[1], re.M))
    assert set(ran) == {pid for _, pid in expected(ns.engine, ns.version)}, text
    assert set(ran.values()) == {"passed"}, text
    steps = [ln for ln in lines if ln.startswith("... ")]
    timed = [ln for ln in lines if re.match(r"^    done in \d+\.\d s", ln)]
    assert len(steps) >= 4 and len(timed) >= 4, text  # fetch, environment, apply, verify
