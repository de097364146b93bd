"""`patcher drafter check|fix` on drafters laid out as `speculators` 0.9.0 and `specforge` 0.2.0 write
them (tests/support/real_drafters.py: built from the tools' own wheels, fetched once into
~/.cache/kimi-patcher/tools), at Kimi-K2.5 shapes, header-only.

Engine releases are named by ``--engine-version``: their published files as the manifests declare
them, so every expectation here holds for the releases as published.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import real_drafters as rd
from tests.test_drafter import check_json, run

pytestmark = pytest.mark.wheels


def findings(argv: list[str]) -> tuple[int, dict[str, dict]]:
    code, doc = check_json(argv)
    return code, {f["code"]: f for f in doc["findings"]}


def check(drafter: Path, target: Path, engine: str, version: str, *more: str) -> tuple[int, dict[str, dict]]:
    return findings([str(drafter), "--target", str(target), "--engine", engine, "--engine-version", version, *more])


def test_the_fixtures_follow_the_tools_own_files() -> None:
    rd.assert_layout_facts()


def test_specforge_export_runs_its_own_legacy_rope_code(tmp_path: Path) -> None:
    folder = rd.specforge_kimi(tmp_path, base={**rd.SPECFORGE_KIMI_K25, "rope_theta": None, "rope_scaling": None,
                                               "rope_parameters": {"rope_type": "yarn", "rope_theta": 50000.0,
                                                                   "factor": 32.0}})
    config = json.loads((folder / "config.json").read_text())
    # SpecForge mirrors transformers 5's rope_parameters into the legacy keys on export.
    assert (config["rope_theta"], config["rope_scaling"]) == (50000.0, {"rope_type": "yarn", "factor": 32.0})


# --- 7. --flags naming another drafter ---------------------------------------------------------

@pytest.mark.parametrize(("engine", "version", "flags"), [
    ("sglang", "0.5.13", "--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/other-drafter"),
    ("vllm", "0.20.0", """--speculative-config '{"method": "eagle3", "model": "/models/other-drafter"}'"""),
])
def test_flags_naming_another_drafter_is_a_problem(tmp_path: Path, engine: str, version: str, flags: str) -> None:
    drafter = rd.speculators_kimi(tmp_path)
    code, f = check(drafter, rd.kimi_target(tmp_path), engine, version, "--flags", flags)
    assert code == 1
    assert (f["flags.draft_path"]["level"], f["flags.draft_path"]["found"]) == ("problem", "/models/other-drafter")


def test_flags_naming_the_checked_drafter_raise_no_path_finding(tmp_path: Path) -> None:
    drafter = rd.speculators_kimi(tmp_path)
    flags = f"""--speculative-config '{{"method": "eagle3", "model": "{drafter}"}}'"""
    _, f = check(drafter, rd.kimi_target(tmp_path), "vllm", "0.20.0", "--flags", flags)
    assert "flags.draft_path" not in f and f["flags.algorithm"]["level"] == "ok"
