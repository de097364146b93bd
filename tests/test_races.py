"""Runs racing on one install (child processes of tests/support/killpoints.py, lined up on a gate):
the lock serialises them, exactly one does the work, and apply racing revert ends all old or all
new, never mixed. On toy_copies' engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import toy_copies
from tests.support.toy_copies import (
    ALL_FILES,
    FAMILY_FILES,
    KILL_FAMILIES,
    REPO,
    cfg_for,
    child_result,
    kinds,
    leftovers,
    new_env,
    run,
)

base_venv = toy_copies.base_venv


TRIED: dict[str, list[str]] = {}


def race(tmp_path: Path, cfgs: list[dict]) -> list[dict]:
    gate = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-m", "tests.support.killpoints", json.dumps(dict(c, gate=str(gate)))],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL) for c in cfgs]
    deadline = time.monotonic() + 90
    while len(list(tmp_path.glob("go.*.ready"))) < len(cfgs) and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.touch()
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        out.append(child_result(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)))
    return out


@pytest.mark.parametrize("n", [2, 8])
def test_concurrent_applies_do_the_work_once(base_venv, tmp_path, n):
    env = new_env(base_venv, tmp_path / "e", KILL_FAMILIES)
    results = race(tmp_path, [cfg_for(env, "apply")] * n)
    workers = [r for r in results if r.get("changed")]
    assert len(workers) == 1, f"{len(workers)} of {n} applies wrote: {results}"
    assert workers[0]["changed"] == list(ALL_FILES)
    assert all(r["exit"] == 0 and r["states"] == {f: "applied" for f in FAMILY_FILES} for r in results), results
    assert kinds(env, ALL_FILES) == {r: "new" for r in ALL_FILES}
    assert not leftovers(env)
    TRIED[f"race {n} applies"] = [f"{len(workers)} wrote, {n - len(workers)} no-op"]
    print(f"\n{n} concurrent applies: exactly one wrote {workers[0]['changed']}, the others were no-ops")


@pytest.mark.parametrize("start", ["pristine", "applied"])
def test_apply_racing_revert_ends_consistent(base_venv, tmp_path, start):
    seen = []
    for i in range(3):
        env = new_env(base_venv, tmp_path / f"e{i}", KILL_FAMILIES)
        if start == "applied":
            assert run("apply", env.opts())[0] == 0
        a, r = race(tmp_path / f"e{i}", [cfg_for(env, "apply"), cfg_for(env, "revert")])
        final = set(kinds(env, ALL_FILES).values())
        assert final in ({"new"}, {"old"}), f"round {i}: files mixed after apply || revert: {kinds(env, ALL_FILES)}"
        assert a["exit"] == 0 and r["exit"] == 0, (a, r)
        if final == {"new"}:  # revert ran first (nothing or everything to undo), then apply
            assert a["changed"] == list(ALL_FILES) and r["changed"] in ([], list(ALL_FILES)), (a, r)
        else:  # apply first, then revert undid everything
            assert r["changed"] == list(ALL_FILES), (a, r)
        assert not leftovers(env)
        seen.append(final.pop())
    print(f"\napply || revert from {start}: final states {seen}")


@pytest.fixture(scope="module", autouse=True)
def _campaign_summary():
    yield
    toy_copies.print_campaign(TRIED)
