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


# --- 1. aux ids in eagle_config: what each vLLM runner takes ----------------------------------

SPECFORGE_IDS = [4, 30, 56]  # a SpecForge run whose draft config names other layers than the default


@pytest.mark.parametrize(("version", "level_v1", "level_v2", "default"), [
    ("0.21.0", "problem", "hint", "v1"),  # v1 reads eagle_config ids only from 0.22.0; v2 never
    ("0.24.0", "ok", "hint", "v1"),
    ("0.29.0", "ok", "problem", "v2"),  # v2 is the default for a Kimi target from 0.29.0
])
def test_ids_only_in_eagle_config_per_vllm_runner(tmp_path: Path, version: str, level_v1: str, level_v2: str,
                                                  default: str) -> None:
    drafter = rd.specforge_kimi(tmp_path, ids=SPECFORGE_IDS)
    code, f = check(drafter, rd.kimi_target(tmp_path), "vllm", version)
    other = "v2" if default == "v1" else "v1"
    by_runner = {default: f["aux.capture"], other: f[f"aux.capture.{other}"]}
    assert (by_runner["v1"]["level"], by_runner["v2"]["level"]) == (level_v1, level_v2)
    switch = "VLLM_USE_V2_MODEL_RUNNER=1 selects v2" if default == "v1" else "VLLM_USE_V2_MODEL_RUNNER=0 selects v1"
    assert f"{default} runner (the one this launch uses by default; {switch})" in f["aux.capture"]["message"]
    if level_v1 == "problem":
        assert "captures [2, 30, 58]" in by_runner["v1"]["message"]
        assert "the v1 runner reads eagle_config ids only from 0.22.0" in by_runner["v1"]["message"]
        assert "run 'patcher apply --engine vllm': the patched release captures them" in by_runner["v1"]["hint"]
    assert "the v2 runner reads no ids from eagle_config" in by_runner["v2"]["message"]
    # vllm/eagle3-config-aux-ids is pending on every one of these releases as published: verify says so.
    assert code == 1 and f["setup.eagle3-config-aux-ids"]["level"] == "problem"


def test_top_level_and_eagle_config_ids_that_disagree(tmp_path: Path) -> None:
    drafter = rd.specforge_kimi(tmp_path, ids=SPECFORGE_IDS, eagle_aux_hidden_state_layer_ids=[2, 30, 58])
    target = rd.kimi_target(tmp_path)
    code, f = check(drafter, target, "vllm", "0.24.0")
    assert code == 1 and f["aux.ids_keys"]["level"] == "problem"
    assert "vLLM takes the top-level list" in f["aux.ids_keys"]["message"]
    assert "captures [2, 30, 58]" in f["aux.capture"]["message"]  # the top-level list wins on vLLM
    _, f = check(drafter, target, "sglang", "0.5.13")
    assert "captures [4, 30, 56]" in f["aux.capture"]["message"]  # SGLang reads eagle_config


def test_after_apply_follows_the_config_ids_family_once_merged(tmp_path: Path) -> None:
    """vllm/eagle3-config-aux-ids lives on another branch: the check keys on its id, so a pending
    state (what its manifest gives the published files) turns into 'after patcher apply' by itself."""
    from dataclasses import replace

    from packaging.version import Version

    from patcher.drafter import facts
    from patcher.drafter.checkpoint import read_checkpoint, read_config
    from patcher.drafter.checks import check_drafter
    from patcher.drafter.configs import parse_drafter_config, parse_target_config
    from patcher.release.release import FamilyState, from_version

    drafter, target = rd.specforge_kimi(tmp_path, ids=SPECFORGE_IDS), rd.kimi_target(tmp_path)
    ckpt = read_checkpoint(drafter)
    d = parse_drafter_config(ckpt.config, drafter / "config.json")
    t = parse_target_config(read_config(target), target / "config.json")
    base = from_version("vllm", Version("0.21.0"))
    fam = FamilyState(replace(base.families[0].family, name=facts.CONFIG_AUX_IDS_FAMILY), "pending", "needs v1")
    release = replace(base, families=(*base.families, fam))
    (cap,) = [x for x in check_drafter(ckpt, d, t, release, None) if x.code == "aux.capture"]
    assert cap.level == "problem"
    assert "after 'patcher apply --engine vllm' it captures [4, 30, 56]" in cap.message
    assert cap.hint == "run 'patcher apply --engine vllm': the patched release captures them"


# --- 4. what the release does as it stands, and after `patcher apply` -------------------------

def test_vllm_0_15_1_as_published_captures_nothing_for_deepseek(tmp_path: Path) -> None:
    drafter = rd.speculators_kimi(tmp_path)
    code, f = check(drafter, rd.kimi_target(tmp_path, k25=False), "vllm", "0.15.1")
    cap = f["aux.capture"]
    assert (code, cap["level"], cap["found"]) == (1, "problem", "nothing")
    assert cap["message"].startswith("vllm 0.15.1, v1 runner (the one this launch uses by default; "
                                     "VLLM_USE_V2_MODEL_RUNNER=1 selects v2) captures nothing (its DeepSeek/Kimi "
                                     "model has no EAGLE-3 aux capture (vllm/mla-aux-capture is pending)); after "
                                     "'patcher apply --engine vllm' it captures [2, 30, 58] in eager and graph mode")
    assert f["aux.capture.v2"]["message"].endswith(
        "after 'patcher apply --engine vllm' it still captures nothing (the v2 runner has no EAGLE-3 aux path before "
        "0.17.0); the drafter was trained on [2, 30, 58]")


def test_sglang_0_5_9_as_published_stops_at_load_for_k25(tmp_path: Path) -> None:
    """Issue 32 case 8: not "captures nothing": the load stops with an AttributeError."""
    drafter = rd.specforge_kimi(tmp_path)
    code, f = check(drafter, rd.kimi_target(tmp_path), "sglang", "0.5.9")
    cap = f["aux.capture"]
    assert (code, cap["level"], cap["found"]) == (1, "problem", "the load stops (AttributeError)")
    assert cap["message"] == (
        "sglang 0.5.9 stops at load with an AttributeError, before anything is captured (the Kimi-K2.5 wrapper has "
        "no set_eagle3_layers_to_capture, which the model runner calls for EAGLE3 (sglang/k25-aux-capture is "
        "pending)); after 'patcher apply --engine sglang' it captures [2, 30, 58] in eager and graph mode (adds 1 "
        "only to an id list starting at 1 (0.5.13's rule)); the drafter was trained on [2, 30, 58]")


# --- 5. SpecForge's numbering ---------------------------------------------------------------------

def test_specforge_numbering_is_said_once_and_judged_by_what_it_means(tmp_path: Path) -> None:
    drafter, target = rd.specforge_kimi(tmp_path, ids=[1, 29, 57]), rd.kimi_target(tmp_path)
    code, f = check(drafter, target, "sglang", "0.5.13", "--flags",
                    f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {drafter}")
    assert f["aux.layer_ids"]["message"] == (
        "aux layer ids [1, 29, 57] start at 1: SpecForge's numbering (output of layer i), read as SGLang 0.5.13 "
        "reads it: the target layers [2, 30, 58] in the numbering vLLM and speculators use")
    assert (f["aux.capture"]["level"], f["aux.capture"]["hint"]) == ("ok", "")
    assert "captures [2, 30, 58] in eager and graph mode" in f["aux.capture"]["message"]
    assert sum("numbering" in x["message"] + x["hint"] for x in f.values()) == 1
    # vLLM takes ids as given: the same drafter is a problem there, with the ids to write.
    _, f = check(drafter, target, "vllm", "0.24.0")
    assert (f["aux.capture"]["level"], f["aux.capture"]["found"]) == ("problem", "eager [1, 29, 57], graph [1, 29, 57]")
    assert '"eagle_aux_hidden_state_layer_ids": [2, 30, 58]' in f["aux.capture"]["hint"]


# --- 2. EAGLE 3.1 switches ---------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "outcomes"), [
    # speculators' EAGLE-3 defaults: norm_before_fc (input_norm.weight) and norm_output on.
    ("0.17.0", {"norm_before_fc": "refused loudly", "norm_output": "dropped in silence"}),
    ("0.18.0", {"norm_before_fc": "dropped in silence", "norm_output": "dropped in silence"}),
    ("0.24.0", {"norm_before_fc": "honoured", "norm_output": "dropped in silence"}),
    ("0.25.0", {"norm_before_fc": "honoured", "norm_output": "honoured"}),
])
def test_speculators_default_drafter_switches_on_vllm(tmp_path: Path, version: str, outcomes: dict[str, str]) -> None:
    code, f = check(rd.speculators_kimi(tmp_path), rd.kimi_target(tmp_path), "vllm", version)
    for switch, outcome in outcomes.items():
        finding = f[f"eagle31.{switch}"]
        assert f": {outcome}" in finding["message"], (switch, finding["message"])
        assert finding["level"] == ("ok" if outcome == "honoured" else "problem")
    if any(o != "honoured" for o in outcomes.values()):
        assert code == 1


@pytest.mark.parametrize(("version", "fc_norm", "norm_output"), [
    ("0.5.12", "dropped in silence", "dropped in silence"),  # registered, but the MLA drafter reads neither
    ("0.5.13", "honoured", "honoured"),
])
def test_mla_eagle31_drafter_on_sglang(tmp_path: Path, version: str, fc_norm: str, norm_output: str) -> None:
    _, f = check(rd.mla_eagle31(tmp_path), rd.kimi_target(tmp_path), "sglang", version)
    assert f": {fc_norm}" in f["eagle31.fc_norm"]["message"]
    assert f": {norm_output}" in f["eagle31.norm_output"]["message"]
    if fc_norm != "honoured":  # our keys family makes the skipped fc_norm.* weights loud
        assert "after 'patcher apply --engine sglang' it is refused at load" in f["eagle31.fc_norm"]["message"]
        assert f["eagle31.fc_norm"]["hint"] == "use sglang 0.5.13 or newer"
    assert "aux.capture" in f  # the MLA drafter's capture is judged like any other


@pytest.mark.parametrize(("version", "published"), [
    ("0.20.0", "dropped in silence"),  # the class's own loader skips input_norm.* (no parameter)
    ("0.24.0", "dropped in silence"),
    ("0.25.0", "refused loudly, the server stops at load"),  # AutoWeightsLoader: no module input_norm
])
def test_mla_norm_before_fc_on_vllm(tmp_path: Path, version: str, published: str) -> None:
    """No vLLM release's MLA class reads norm_before_fc; eagle31-switches refuses it where it is dropped."""
    drafter = rd.mla_eagle31(tmp_path)
    config = json.loads((drafter / "config.json").read_text())
    (drafter / "config.json").write_text(json.dumps({**config, "norm_before_fc": True}))
    _, f = check(drafter, rd.kimi_target(tmp_path), "vllm", version)
    finding = f["eagle31.norm_before_fc"]
    assert finding["level"] == "problem"
    assert f": {published} (" in finding["message"], finding["message"]
    refused_after_apply = "after 'patcher apply --engine vllm' it is refused at load" in finding["message"]
    assert refused_after_apply == (published == "dropped in silence"), finding["message"]
    assert finding["hint"] == "no vllm release runs norm_before_fc for this drafter"


def test_specforge_fc_norm_drafter_on_sglang_before_0_5_12(tmp_path: Path) -> None:
    _, f = check(rd.specforge_kimi(tmp_path, fc_norm=True), rd.kimi_target(tmp_path), "sglang", "0.5.11")
    assert f["eagle31.fc_norm"]["level"] == "problem"
    assert "dropped in silence (the loader skips fc_norm.* without a message)" in f["eagle31.fc_norm"]["message"]
    assert "keys.unknown" not in f  # the fc_norm.* weights are said once, by the switch check


@pytest.mark.parametrize(("engine", "version", "runs", "eagle31_todo"), [
    ("vllm", "0.19.0", "pre-norm state (plain EAGLE-3)", "use vllm 0.22.0 or newer"),  # nothing reads it
    ("vllm", "0.22.0", "post-norm state (EAGLE 3.1)", "nothing to do"),
    ("sglang", "0.5.11", "pre-norm state (plain EAGLE-3)", "use sglang 0.5.12 or newer"),
    ("sglang", "0.5.13", "post-norm state (EAGLE 3.1)", "nothing to do"),
])
def test_norm_output_whose_meaning_the_checkpoint_cannot_tell_is_unknown(tmp_path: Path, engine: str, version: str,
                                                                         runs: str, eagle31_todo: str) -> None:
    """Issue 32, case 3. SpecForge 0.2.0's norm_output (true: its default, written out) is the norm before
    lm_head, with the pre-norm state fed to the next step: plain EAGLE-3; EAGLE 3.1's feeds the post-norm
    state on. An HF-layout Llama drafter without norm_before_fc may be either: what the release runs is
    said, whether it is the training is unknown (never ok, never a plain problem), with a hint per reading."""
    drafter = rd.specforge_kimi(tmp_path, norm_output=True)
    code, f = check(drafter, rd.kimi_target(tmp_path), engine, version)
    got = f["eagle31.norm_output"]
    assert got["level"] == "unknown" and f"the next draft step gets the {runs}" in got["message"], got
    assert "SpecForge 0.2.0 and earlier write norm_output for another switch" in got["message"]
    assert "This checkpoint cannot tell which" in got["message"]
    assert got["hint"] == ("trained with SpecForge 0.2.0 or earlier: delete norm_output from config.json (its default "
                           f"is the same) and every release runs it as trained; trained for EAGLE 3.1: {eagle31_todo}")
    assert code != 0  # unknown is no go
    if "pre-norm" in runs:  # where nothing reads the key our guards do not refuse it (either reading may be true)
        assert f"the same after 'patcher apply --engine {engine}', whose guards leave this key alone" in got["message"]


@pytest.mark.parametrize(("engine", "version"), [("vllm", "0.19.0"), ("sglang", "0.5.11")])
def test_norm_output_marked_as_eagle31_by_norm_before_fc_is_refused_after_apply(tmp_path: Path, engine: str,
                                                                                version: str) -> None:
    """norm_before_fc, which SpecForge 0.2.0 never writes, makes norm_output EAGLE 3.1's: where the release
    does not read it, that is a plain problem, and 'patcher apply' turns the silent run into a refusal
    (vLLM: the Llama class refuses the pair; SGLang g1: norm_before_fc itself)."""
    drafter = rd.specforge_kimi(tmp_path, norm_output=True, norm_before_fc=True)
    _, f = check(drafter, rd.kimi_target(tmp_path), engine, version)
    got = f["eagle31.norm_output"]
    assert got["level"] == "problem" and ": dropped in silence" in got["message"], got
    assert got["hint"] == f"use {engine} {'0.22.0' if engine == 'vllm' else '0.5.12'} or newer"
    if engine == "vllm":
        assert "after 'patcher apply --engine vllm' it is refused at load" in got["message"], got["message"]
    else:
        assert "after 'patcher apply --engine sglang' it is refused" in f["eagle31.norm_before_fc"]["message"]


def test_specforge_default_drafter_has_no_norm_output_finding(tmp_path: Path) -> None:
    """At its defaults SpecForge writes no norm_output: every release runs it as trained, nothing to say."""
    drafter, target = rd.specforge_kimi(tmp_path), rd.kimi_target(tmp_path)
    for engine, version in (("vllm", "0.22.0"), ("sglang", "0.5.13")):
        _, f = check(drafter, target, engine, version)
        assert "eagle31.norm_output" not in f, (engine, version)


def test_specforge_norm_output_false_is_said(tmp_path: Path) -> None:
    drafter = rd.specforge_kimi(tmp_path, norm_output=False)
    _, f = check(drafter, rd.kimi_target(tmp_path), "vllm", "0.25.0")
    got = f["eagle31.norm_output"]
    assert got["level"] == "hint" and "trains lm_head on the un-normed state" in got["message"]


def test_eagle31_norm_output_with_norm_before_fc_stays_ok(tmp_path: Path) -> None:
    """norm_before_fc is not SpecForge 0.2.0's: an HF drafter with it means EAGLE 3.1's norm_output."""
    drafter = rd.specforge_kimi(tmp_path, norm_output=True, norm_before_fc=True)
    _, f = check(drafter, rd.kimi_target(tmp_path), "vllm", "0.22.0")
    assert f["eagle31.norm_output"]["level"] == "ok"


def test_switch_weights_without_the_switch_are_a_problem(tmp_path: Path) -> None:
    drafter = rd.speculators_kimi(tmp_path)
    config = json.loads((drafter / "config.json").read_text())
    config["norm_before_fc"] = False
    (drafter / "config.json").write_text(json.dumps(config))
    _, f = check(drafter, rd.kimi_target(tmp_path), "vllm", "0.25.0")
    assert f["eagle31.norm_before_fc"]["level"] == "problem"
    assert f["eagle31.norm_before_fc"]["found"].startswith("norm_before_fc unset or false; e.g. input_norm.weight")


# --- 3. RoPE written only as transformers 5's rope_parameters -----------------------------------------

def _as_eagle3_llama(folder: Path) -> None:
    """A speculators drafter's transformer_layer_config copied as is into an EAGLE-3 Llama config:
    what today's `fix` wrote (and what a hand conversion does)."""
    config = json.loads((folder / "config.json").read_text())
    layer = dict(config["transformer_layer_config"])
    layer.update({"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": config["draft_vocab_size"],
                  "eagle_config": {"use_aux_hidden_state": True,
                                   "eagle_aux_hidden_state_layer_ids": config["eagle_aux_hidden_state_layer_ids"]}})
    (folder / "config.json").write_text(json.dumps(layer))


def test_rope_parameters_only_runs_at_theta_10000_on_sglang_with_transformers_4(tmp_path: Path) -> None:
    drafter = rd.speculators_kimi(tmp_path, norm_before_fc=False, norm_output=False)
    _as_eagle3_llama(drafter)
    target = rd.kimi_target(tmp_path)
    code, f = check(drafter, target, "sglang", "0.5.9")
    rope = f["config.rope"]
    assert (code, rope["level"]) == (1, "problem")
    assert rope["found"] == "{'rope_type': 'default', 'rope_theta': 10000.0}"
    assert "'rope_type': 'yarn'" in rope["wanted"] and "'rope_theta': 50000.0" in rope["wanted"]
    # SGLang 0.5.10 reads configs with transformers 5, vLLM maps rope_parameters itself.
    for engine, version in (("sglang", "0.5.10"), ("vllm", "0.15.1")):
        _, f = check(drafter, target, engine, version)
        assert f["config.rope"]["level"] == "ok", (engine, version)
    # And the comparison with the target reads the trained RoPE, not "(not set)".
    _, f = check(rd.speculators_kimi(tmp_path, "d3"), target, "vllm", "0.25.0")
    assert f["context.rope"]["level"] == "ok"


def test_specforge_export_is_read_as_trained_on_sglang_0_5_9(tmp_path: Path) -> None:
    base = {**rd.SPECFORGE_KIMI_K25, "rope_theta": None, "rope_scaling": None,
            "rope_parameters": {"rope_type": "yarn", "rope_theta": 50000.0, "factor": 32.0,
                                "original_max_position_embeddings": 4096}}
    drafter = rd.specforge_kimi(tmp_path, base=base)  # SpecForge's own exporter mirrors the legacy keys
    _, f = check(drafter, rd.kimi_target(tmp_path), "sglang", "0.5.9")
    assert f["config.rope"]["level"] == "ok"


# --- 6. fix -------------------------------------------------------------------------------------------

def fix(drafter: Path, target: Path, out: Path, *argv: str, detect=None) -> tuple[int, dict, str]:
    from tests.test_drafter import no_engine

    code, stdout, err = run(["fix", str(drafter), "--out", str(out), "--target", str(target), "--json", *argv],
                            detect or no_engine)
    doc = json.loads(stdout)
    assert doc["exit"] == code
    return code, doc, err


def test_fix_keeps_the_eagle31_switches_and_writes_ids_in_both_places(tmp_path: Path) -> None:
    drafter, new = rd.speculators_kimi(tmp_path), tmp_path / "new"
    _, doc, _ = fix(drafter, rd.kimi_target(tmp_path), new, "--engine", "sglang", "--engine-version", "0.5.17")
    config = json.loads((new / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert (config["norm_before_fc"], config["norm_output"], config["fc_norm"]) == (True, True, False)
    assert config["eagle_aux_hidden_state_layer_ids"] == config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] \
        == [2, 30, 58]
    assert "(EAGLE 3.1 switches kept: norm_before_fc, norm_output)" in doc["notes"][0]
    problems = {p["code"] for p in doc["problems"]}
    assert not {"eagle31.norm_before_fc", "eagle31.norm_output", "aux.capture", "config.rope"} & problems


def test_fix_writes_the_rope_transformers_4_reads_and_checks_it_by_that_reading(tmp_path: Path) -> None:
    from tests.test_drafter import installed

    drafter, new = rd.speculators_kimi(tmp_path, norm_before_fc=False, norm_output=False), tmp_path / "new"
    # sglang 0.5.9 after 'patcher apply' (every family applied): only the drafter itself can be wrong.
    code, doc, _ = fix(drafter, rd.kimi_target(tmp_path, k25=False), new, detect=installed("sglang", "0.5.9"))
    config = json.loads((new / "config.json").read_text())
    assert (config["rope_theta"], config["rope_scaling"]) == (50000.0, {
        "rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 1.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0})
    assert any(n.startswith("rope_theta and rope_scaling written from rope_parameters") for n in doc["notes"])
    assert (code, doc["problems"]) == (0, [])
    # The copy, checked again the way sglang 0.5.9 reads it:
    _, f = findings([str(new), "--target", str(rd.kimi_target(tmp_path, "k2b", k25=False)), "--engine", "sglang",
                     "--engine-version", "0.5.9"])
    assert f["config.rope"]["level"] == "ok"


def test_fix_writes_top_level_ids_for_vllm_runners(tmp_path: Path) -> None:
    drafter, new = rd.specforge_kimi(tmp_path, ids=SPECFORGE_IDS), tmp_path / "new"
    code, doc, _ = fix(drafter, rd.kimi_target(tmp_path), new, "--engine", "vllm", "--engine-version", "0.29.0")
    config = json.loads((new / "config.json").read_text())
    assert config["eagle_aux_hidden_state_layer_ids"] == config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] \
        == SPECFORGE_IDS
    assert (new / "model.safetensors").stat().st_size == (drafter / "model.safetensors").stat().st_size
    assert "aux.capture" not in {p["code"] for p in doc["problems"]}


def test_fix_converts_specforge_numbering_for_vllm(tmp_path: Path) -> None:
    drafter, new = rd.specforge_kimi(tmp_path, ids=[1, 29, 57]), tmp_path / "new"
    _, doc, _ = fix(drafter, rd.kimi_target(tmp_path), new, "--engine", "vllm", "--engine-version", "0.24.0")
    config = json.loads((new / "config.json").read_text())
    assert config["eagle_aux_hidden_state_layer_ids"] == config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] \
        == [2, 30, 58]
    assert "aux layer ids [2, 30, 58] written at the top level and in eagle_config (the drafter's [1, 29, 57] in " \
           "the numbering vllm reads)" in doc["notes"]


def test_fix_writes_nothing_when_the_release_reads_the_drafter_as_trained(tmp_path: Path) -> None:
    from tests.test_drafter import installed

    drafter, new = rd.specforge_kimi(tmp_path), tmp_path / "new"
    code, doc, _ = fix(drafter, rd.kimi_target(tmp_path), new, detect=installed("sglang", "0.5.13"))
    assert (code, doc["out"], doc["files"], doc["problems"]) == (0, None, [], [])
    assert doc["notes"] == ["nothing to fix: sglang 0.5.13 reads this drafter's keys and config as they are; "
                            "nothing was written"]
    assert not new.exists()


def test_fix_renames_to_the_spelling_every_release_reads(tmp_path: Path) -> None:
    """On SGLang 0.5.11 with our keys family applied, layers.0.* loads only through our patch:
    the copy is renamed to midlayer.*, which 0.5.11 reads with or without it."""
    from tests.test_drafter import installed

    drafter, new = rd.speculators_kimi(tmp_path, norm_before_fc=False, norm_output=False), tmp_path / "new"
    _, doc, _ = fix(drafter, rd.kimi_target(tmp_path, k25=False), new, detect=installed("sglang", "0.5.11"))
    assert doc["renamed"] == {"from": "layers.0.", "to": "midlayer.", "count": 10}


def test_fix_shows_progress_on_large_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from patcher.cli import drafter_cli as cli

    drafter, new = rd.specforge_kimi(tmp_path, ids=SPECFORGE_IDS), tmp_path / "new"
    monkeypatch.setattr(cli, "PROGRESS_FROM", 1)  # the header-only drafter is 3.7 GB of holes; say "large"
    code, out, err = run(["fix", str(drafter), "--out", str(new), "--target", str(rd.kimi_target(tmp_path)),
                          "--engine", "vllm", "--engine-version", "0.29.0"])
    lines = err.splitlines()
    assert lines[0].startswith("  copying: 0.0 / ") and lines[-1].startswith("  verifying: ")
    assert any(line.startswith("  copying: ") and line.split(": ")[1].split(" / ")[0] ==
               line.split(" / ")[1].split(" ")[0] for line in lines)  # reaches the total


def test_top_level_ids_only_are_not_read_by_sglang(tmp_path: Path) -> None:
    """A hand conversion that moved the ids to the top level only: vLLM reads them, SGLang takes its
    default, here another set than trained."""
    base = {k: v for k, v in rd.SPECFORGE_KIMI_K2.items() if k != "eagle_config"}
    drafter = rd.specforge_kimi(tmp_path, base={**base, "eagle_config": {"use_aux_hidden_state": True},
                                                "eagle_aux_hidden_state_layer_ids": SPECFORGE_IDS})
    _, f = check(drafter, rd.kimi_target(tmp_path), "sglang", "0.5.13")
    cap = f["aux.capture"]
    assert (cap["level"], cap["found"]) == ("problem", "eager [2, 30, 58], graph [2, 30, 58]")
    assert "SGLang reads ids only from eagle_config" in cap["message"] and "state them there too" in cap["hint"]


@pytest.mark.parametrize("config", ["k2", "k25"])
@pytest.mark.parametrize(("engine", "version"), [("sglang", "0.5.9"), ("sglang", "0.5.13"), ("vllm", "0.24.0"),
                                                 ("vllm", "0.29.0")])
def test_specforge_shipped_kimi_configs_pass_on_patched_releases(tmp_path: Path, config: str, engine: str,
                                                                  version: str) -> None:
    """SpecForge's own Kimi drafter configs, exported as SpecForge exports them, on each release
    after 'patcher apply': nothing wrong (the RoPE differs from the target's, as trained: a hint); whether
    the keys load is the loader's to say (tests/test_drafter_loader.py)."""
    from tests.test_drafter import installed

    base = rd.SPECFORGE_KIMI_K2 if config == "k2" else rd.SPECFORGE_KIMI_K25
    drafter = rd.specforge_kimi(tmp_path, base=base)
    code, doc = check_json([str(drafter), "--target", str(rd.kimi_target(tmp_path))], installed(engine, version))
    assert [f for f in doc["findings"] if f["level"] == "problem"] == []
    # named by its state, the release's loader cannot run: its keys are not proven (issue 52)
    assert [f["code"] for f in doc["findings"] if f["level"] == "unknown"] == ["keys.load"] and code == 1


@pytest.mark.parametrize(("engine", "version", "written", "code"), [
    ("sglang", "0.5.17", True, 0),  # converted; norm_before_fc read from 0.5.17
    ("sglang", "0.5.13", True, 1),  # converted, but 0.5.13 has no norm_before_fc: refused at load, said
    ("vllm", "0.25.0", False, 0),  # read as written: nothing to fix
])
def test_fix_of_a_speculators_default_drafter_on_patched_releases(tmp_path: Path, engine: str, version: str,
                                                                   written: bool, code: int) -> None:
    from tests.test_drafter import installed

    drafter, new = rd.speculators_kimi(tmp_path), tmp_path / "new"
    got, doc, _ = fix(drafter, rd.kimi_target(tmp_path), new, detect=installed(engine, version))
    assert (got, new.exists()) == (code, written)
    if code:
        assert [p["code"] for p in doc["problems"]] == ["eagle31.norm_before_fc"]
        assert "refused loudly" in doc["problems"][0]["message"]


@pytest.mark.parametrize(("version", "switch"), [("0.18.0", "norm_before_fc"), ("0.22.0", "norm_output")])
def test_a_switch_our_family_carries_says_apply_not_upgrade(tmp_path: Path, version: str, switch: str) -> None:
    """vllm/eagle31-switches backports upstream's propagation there (its [[drafter_fact]] entries):
    the check says the release drops it as published and honours it once applied, and the hint is
    the apply, not an upgrade."""
    _, f = check(rd.speculators_kimi(tmp_path), rd.kimi_target(tmp_path), "vllm", version)
    finding = f[f"eagle31.{switch}"]
    assert finding["level"] == "problem" and ": dropped in silence" in finding["message"]
    assert "after 'patcher apply --engine vllm' it is honoured" in finding["message"]
    assert finding["hint"] == "run 'patcher apply --engine vllm'"
