"""The newcomer's path (issue 34): the README's two commands, pasted into a fresh clone, work and
say what they did (patcher/maintainer/newcomer.py). The slow test runs them for real, with the
machine's caches; ``python -m patcher.maintainer.newcomer --cold DIR`` measures a fresh machine."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from patcher.maintainer import newcomer
from tests.support.probe_ids import expected

README = Path(__file__).resolve().parent.parent / "README.md"
# What the clone's test command runs: the pure CLI, the life cycle on toy installs, and the
# demo's release applied, verified and reverted on its real wheel (the wheel cache, from the clone).
CLONE_TESTS = ("tests/test_cli.py", "tests/test_lifecycle.py", "tests/test_releases.py::test_release[sglang-0.5.9]")


def test_the_readme_names_two_commands_a_newcomer_can_paste():
    demo, tests = newcomer.readme_commands(README.read_text())
    # Each makes its own virtualenv: nothing lands in the machine's python3 (issue 34 item 9).
    for command in (demo, tests):
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install -q -e "), command
    assert demo.endswith("-m patcher.maintainer.demo --engine sglang --version 0.5.9"), demo
    assert tests.endswith(".venv/bin/python -m pytest"), tests


def test_a_readme_without_the_section_is_an_error_that_names_it():
    with pytest.raises(ValueError, match="The two commands"):
        newcomer.readme_commands("# kimi-patcher\n```sh\nls\n```\n")
    with pytest.raises(ValueError, match="wanted two sh blocks .* found 1"):
        newcomer.readme_commands("## The two commands\n```sh\nls\n```\n")


def test_a_cold_run_refuses_a_folder_that_is_not_empty(tmp_path, capsys):
    (tmp_path / "left-over").write_text("x")
    assert newcomer.main(["--cold", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not empty" in err and "hint:" in err
    assert [p.name for p in tmp_path.iterdir()] == ["left-over"]


def test_cold_caches_are_moved_into_the_folder_named(tmp_path):
    assert newcomer.caches(tmp_path) == {"KIMI_PATCHER_CACHE": tmp_path / "kimi-patcher",
                                         "PIP_CACHE_DIR": tmp_path / "pip"}


@pytest.mark.full
@pytest.mark.cpuenv
def test_the_readme_two_commands_work_in_a_fresh_clone(tmp_path):
    repo = README.parent
    if subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.fail(f"{repo} is not a git checkout: the newcomer's path starts from a clone")
    lines: list[str] = []
    # The test command runs a few files: the whole default tier in the clone would run it twice
    # in CI, whose default tier is that same command on a clean clone (8 minutes on 2 cores).
    runs = newcomer.walk(repo, log=tmp_path, say=lines.append, pytest_addopts=" ".join(CLONE_TESTS))
    assert [r.code for r in runs] == [0, 0], "\n".join(lines) + "\n" + runs[-1].output[-4000:]
    demo, tests = runs

    # The first: every probe of the release ran on a real import and passed; the run says so.
    verified = demo.output.split("patcher verify", 1)[1]
    ran = dict(re.findall(r"^\s+probe (\S+): (.*)$", verified, re.M))
    assert set(ran) == {pid for _, pid in expected("sglang", "0.5.9")}, demo.output
    assert set(ran.values()) == {"passed"}, demo.output
    assert re.search(r"^total \d+\.\d s; exit 0$", demo.output, re.M), demo.output
    assert "reverted the environment to the published files (exit 0)" in demo.output

    # The second: the tests pass in the clone's own .venv, with nothing failed or skipped for
    # want of something, and print no progress lines when not on a terminal.
    summary = tests.output.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and not re.search(r"failed|error|skipped", summary), summary
    assert "[tests]" not in tests.output


def _du(monkeypatch, code: int, stdout: str, stderr: str) -> None:
    monkeypatch.setattr(newcomer.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, code, stdout, stderr))


def test_disk_use_counts_what_du_saw_when_another_worker_deletes_a_file_meanwhile(tmp_path, monkeypatch):
    """CI's full tier of 1a8ae4e: the second pytest worker removed a cache file while du walked the
    cache; du exited 1 with its total printed, and the newcomer run failed on it."""
    _du(monkeypatch, 1, f"4096\t{tmp_path}\n4096\ttotal\n",
        f"du: cannot access '{tmp_path}/x.tmp': No such file or directory\n")
    assert newcomer.disk_use([tmp_path]) == 4096
    _du(monkeypatch, 1, f"4096\t{tmp_path}\n4096\ttotal\n",
        f"du: cannot read directory '{tmp_path}/y': Permission denied\n")
    with pytest.raises(subprocess.CalledProcessError):
        newcomer.disk_use([tmp_path])
