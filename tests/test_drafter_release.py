"""`patcher drafter check|fix` against the engine release: family states, registries, aux capture.

The setup cases run on the real published files (``--site`` on the cached wheel trees, as
tests/test_cli.py does); the tables in patcher/drafter/facts.py are proven here against every
cached release's files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from patcher import engine_specs
from patcher.cli.main import main
from patcher.core import manifest, matrix
from patcher.core.manifest import contains
from patcher.core.plan import State
from patcher.drafter import eagle31, facts, rope
from patcher.drafter.fix import still_wrong
from patcher.engine_specs.vllm import drafter as vllm_drafter
from patcher.findings import hint, problem
from patcher.maintainer import wheels
from patcher.release.release import FamilyState, from_version
from tests.support import progress
from tests.support.tiers import release_param
from tests.test_drafter import (
    T,
    check_json,
    eagle3_config,
    installed,
    make_drafter,
    make_target,
    run,
    speculators_config,
)

K2_LAYERS = 61


def k2_target(root: Path) -> Path:
    """A Kimi-K2 config: DeepseekV3ForCausalLM, language model settings at the top."""
    folder = root / "kimi-k2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "hidden_size": T,
        "num_hidden_layers": K2_LAYERS, "vocab_size": 64, "max_position_embeddings": 262144,
        "rope_theta": 50000.0}))
    return folder


def cli(*argv: str) -> tuple[int, str, str]:
    import io

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def findings(out: str) -> dict[str, dict]:
    return {f["code"]: f for f in json.loads(out)["findings"]}


# --- what `patcher verify` says, on the real published files -------------------------------

@pytest.mark.wheels
def test_kimi_k2_on_vllm_0_10_2_is_refused_with_the_release_to_use(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    code, out, err = cli("drafter", "check", str(drafter), "--target", str(k2_target(tmp_path)),
                         "--site", str(wheels.tree("vllm", "0.10.2")), "--json")
    assert (code, err) == (1, "")
    f = findings(out)
    for name in ("eagle3-target-whitelist", "mla-aux-capture"):
        assert (f[f"setup.{name}"]["level"], f[f"setup.{name}"]["found"], f[f"setup.{name}"]["hint"]) == (
            "problem", "refused", "use vllm 0.11.1 or newer")
    assert json.loads(out)["engine"]["source"] == "installed"


@pytest.mark.wheels
def test_kimi_k2_on_sglang_0_5_4_has_no_deepseek_capture(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    code, out, _ = cli("drafter", "check", str(drafter), "--target", str(k2_target(tmp_path)),
                       "--site", str(wheels.tree("sglang", "0.5.4")), "--json")
    assert code == 1
    f = findings(out)["setup.k25-aux-capture"]
    assert (f["level"], f["found"], f["hint"]) == ("problem", "refused", "use sglang 0.5.10 or newer")
    assert f["message"].startswith("sglang/k25-aux-capture is refused on sglang 0.5.4: no DeepSeek/Kimi aux "
                                   "hidden-state capture at all")


@pytest.mark.wheels
def test_kimi_k25_on_sglang_without_kimi_k25_is_a_problem(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    code, out, _ = cli("drafter", "check", str(drafter), "--target", str(make_target(tmp_path)),
                       "--site", str(wheels.tree("sglang", "0.5.5")), "--json")
    assert code == 1
    assert findings(out)["target.architecture"] == {
        "level": "problem", "code": "target.architecture",
        "message": "sglang 0.5.5 has no model class for the target's KimiK25ForConditionalGeneration: "
                   "the server stops at load",
        "wanted": "a sglang release that registers KimiK25ForConditionalGeneration", "found": "sglang 0.5.5",
        "hint": "use sglang 0.5.9 or newer"}


@pytest.mark.wheels
def test_site_of_another_environment_after_apply_is_clean(tmp_path: Path) -> None:
    """The README's two-environment setup: the engine lives elsewhere, patched with `apply`."""
    site = tmp_path / "site"
    shutil.copytree(wheels.tree("sglang", "0.5.10"), site)
    assert cli("apply", "--engine", "sglang", "--site", str(site), "--no-probes")[0] == 0
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    code, out, err = cli("drafter", "check", str(drafter), "--target", str(make_target(tmp_path)),
                         "--site", str(site), "--flags=--speculative-algorithm EAGLE3")
    assert (code, err) == (1, "")  # a bare tree: the loader cannot be asked, its keys are not proven
    assert "0 problem(s), 1 unknown" in out
    assert f"engine:  sglang 0.5.10 (installed at {site})\n" in out
    assert "  ok       setup.eagle3-drafter-keys: sglang/eagle3-drafter-keys: applied (variant v1 is in place)\n" in out
    assert "  ok       aux.capture: sglang 0.5.10 captures [2, 30, 58] in eager and graph mode" in out


@pytest.mark.wheels
def test_eagle_instead_of_eagle3_stops_at_the_first_request_once_the_fc_guard_is_applied(tmp_path: Path) -> None:
    """--speculative-algorithm EAGLE with an EAGLE-3 drafter: as published, SGLang runs it with fc never
    applied; with sglang/eagle3-loud-fc-skip applied the drafter raises at the first prefill, and the
    check says so (found on the H200, docs/gpu-proof.md; it said "the server starts" on both)."""
    site = tmp_path / "site"
    shutil.copytree(wheels.tree("sglang", "0.5.13.post1"), site)
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None))
    argv = ("drafter", "check", str(drafter), "--target", str(make_target(tmp_path)), "--site", str(site),
            "--flags=--speculative-algorithm EAGLE", "--json")
    published = findings(cli(*argv)[1])
    assert published["fc.shape"]["message"].startswith("fc is never applied")
    assert "the server starts" in published["flags.algorithm"]["message"]
    assert cli("apply", "--engine", "sglang", "--site", str(site), "--no-probes")[0] == 0
    patched = findings(cli(*argv)[1])
    assert patched["fc.shape"]["message"] == ("fc gets one layer of target features, not the aux layers it fuses: "
                                              "our sglang/eagle3-loud-fc-skip (applied) raises at the first prefill")
    assert patched["flags.algorithm"]["message"].endswith("sglang 0.5.13.post1 starts, and stops at its first "
                                                          "request (fc.shape)")
    assert all(f["level"] == "problem" for f in (patched["fc.shape"], patched["flags.algorithm"]))


@pytest.mark.wheels
def test_lost_and_conflict_are_problems_as_verify_says(tmp_path: Path) -> None:
    site, rel = tmp_path / "site", "sglang/srt/models/llama_eagle3.py"
    shutil.copytree(wheels.tree("sglang", "0.5.9"), site)
    assert cli("apply", "--engine", "sglang", "--site", str(site), "--no-probes")[0] == 0
    shutil.copyfile(wheels.tree("sglang", "0.5.9") / rel, site / rel)  # a reinstall of that one file
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    code, out, _ = cli("drafter", "check", str(drafter), "--site", str(site), "--json")
    f = findings(out)
    assert code == 1
    assert (f["setup.eagle3-drafter-keys"]["found"], f["setup.eagle3-loud-fc-skip"]["found"]) == ("lost", "lost")
    (site / rel).write_text("# rewritten by hand\n")
    code, out, _ = cli("drafter", "check", str(drafter), "--site", str(site), "--json")
    f = findings(out)["setup.eagle3-drafter-keys"]
    assert (code, f["level"], f["found"]) == (1, "problem", "conflict")
    assert f["hint"].startswith("someone edited them")


@pytest.mark.wheels
def test_hints_name_the_environment_given_by_site(tmp_path: Path) -> None:
    tree = wheels.tree("sglang", "0.5.9")
    drafter = make_drafter(tmp_path, config=speculators_config(aux=None))
    code, out, _ = cli("drafter", "check", str(drafter), "--site", str(tree), "--json")
    f = findings(out)
    assert code == 1
    assert f["setup.eagle3-drafter-keys"]["hint"] == f"run 'patcher apply --engine sglang --site {tree}'"
    assert f["config.format"]["hint"] == (
        f"convert it: patcher drafter fix DRAFTER --out NEW --engine sglang --site {tree}")


def test_python_without_the_engine_is_an_error(tmp_path: Path) -> None:
    import sys

    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="midlayer.")
    code, out, err = cli("drafter", "check", str(drafter), "--engine", "vllm", "--python", sys.executable)
    assert (code, out) == (2, "")
    assert err.splitlines()[:3] == ["error: vllm is not installed", "  wanted: a vllm distribution",
                                    f"  found:  none (python: {sys.executable})"]


@pytest.mark.wheels
def test_python_of_a_second_environment(tmp_path: Path) -> None:
    """The README's two virtualenvs: the engine is only in the second, found through its python."""
    import subprocess
    import sys
    import sysconfig

    venv = tmp_path / "engine-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    shutil.copytree(wheels.tree("vllm", "0.18.0"), purelib, dirs_exist_ok=True)
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    python = str(venv / "bin" / "python")
    code, out, err = cli("drafter", "check", str(drafter), "--target", str(k2_target(tmp_path)), "--python", python)
    assert err == ""
    assert f"engine:  vllm 0.18.0 (installed at {purelib})\n" in out
    assert "  ok       setup.mla-aux-capture: vllm/mla-aux-capture: upstream (fixed upstream since 0.18.0" in out
    # The SM120 fusion family is pending there: verify would say so, but it does not change the drafter.
    assert "  hint     setup.sm120-allreduce-fusion: vllm/sm120-allreduce-fusion is pending on vllm 0.18.0" in out
    # Reading ids from eagle_config and the EAGLE 3.1 switches do not concern a drafter that states
    # no ids and turns no switch on: hints, as the fusion.
    assert "  hint     setup.eagle3-config-aux-ids: vllm/eagle3-config-aux-ids is pending on vllm 0.18.0" in out
    assert "  hint     setup.eagle31-switches: vllm/eagle31-switches is pending on vllm 0.18.0" in out
    # The engine's files are there, its dependencies are not: its loader cannot be asked (issue 52).
    assert "  UNKNOWN  keys.load: what the release's loader does with this checkpoint was not asked" in out
    assert "0 problem(s), 1 unknown" in out and code == 1


def test_site_without_the_engine_is_an_error_not_none_installed(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="midlayer.")
    code, out, err = run(["check", str(drafter), "--site", str(tmp_path)],
                         detect=__import__("patcher.drafter.locate", fromlist=["x"]).drafter_detect)
    assert (code, out) == (2, "")
    names = sorted(engine_specs.NAMES)  # every engine, alphabetical, as the message names them
    assert err.splitlines()[:2] == [f"error: neither {' nor '.join(names)} is installed there",
                                    f"  wanted: a distribution of {' or '.join(names)}"]


def test_python_and_site_together_are_a_usage_error(tmp_path: Path) -> None:
    code, out, err = cli("drafter", "check", str(tmp_path), "--python", "python3", "--site", str(tmp_path))
    assert (code, out) == (2, "")
    assert err.splitlines() == ["error: usage: argument --site: not allowed with argument --python",
                                "  wanted: --python or --site, not both", "  found:  --python and --site",
                                "  hint:   'patcher drafter check --help' lists the flags and their defaults"]


# --- which layers the engine captures ------------------------------------------------------

@pytest.mark.parametrize(("version", "ids", "eager", "graph", "level"), [
    ("0.5.9", [2, 30, 58], [3, 31, 59], [2, 30, 58], "problem"),   # +1, and graphs reset to the default
    ("0.5.9", [3, 31, 57], [4, 32, 58], [2, 30, 58], "problem"),
    ("0.5.11", [3, 31, 57], [4, 32, 58], [4, 32, 58], "problem"),  # no reset from 0.5.11, still +1
    # [1, 30, 58] in an EAGLE-3 Llama config is SpecForge's numbering: trained on [2, 31, 59].
    ("0.5.12.post1", [1, 30, 58], [2, 31, 59], [2, 31, 59], "ok"),
    ("0.5.13", [3, 31, 57], [3, 31, 57], [3, 31, 57], "ok"),  # 0.5.13: as given unless the first id is 1
    ("0.5.13", [1, 30, 58], [2, 31, 59], [2, 31, 59], "ok"),
])
def test_sglang_captures_per_mode(tmp_path: Path, version: str, ids: list[int], eager: list[int],
                                  graph: list[int], level: str) -> None:
    # The EAGLE-3 Llama config SGLang reads (ids in eagle_config), on a Kimi-K2 target, whose capture
    # is upstream on these releases. As published (--engine-version): before our aux-ids family.
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=ids), prefix="midlayer.")
    _, doc = check_json([str(drafter), "--target", str(k2_target(tmp_path)), "--engine", "sglang",
                         "--engine-version", version])
    f = {x["code"]: x for x in doc["findings"]}["aux.capture"]
    assert f["level"] == level
    if level == "problem":
        assert f["found"] == f"eager {eager}, graph {graph}"
    else:
        modes = "in eager and graph mode"
        assert f"captures {eager} {modes}" in f["message"]
    if version.startswith("0.5.13"):
        assert "0.5.13 and later" not in f["hint"]  # never "upgrade to" the release it is on


def test_default_ids_on_0_5_9_hint_omitting_them(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="midlayer.")
    _, doc = check_json([str(drafter), "--target", str(k2_target(tmp_path)), "--engine", "sglang",
                         "--engine-version", "0.5.9"])
    f = {x["code"]: x for x in doc["findings"]}["aux.capture"]
    assert (f["level"], f["message"], f["hint"]) == (
        "problem", "sglang 0.5.9 captures [3, 31, 59] in eager mode and [2, 30, 58] with CUDA graphs (adds 1 to "
        "every explicit id; building the CUDA graphs re-calls the setter with no ids, so graph passes capture "
        "the default); after 'patcher apply --engine sglang' it captures [2, 30, 58] in eager and graph mode "
        "(adds 1 only to an id list starting at 1 (0.5.13's rule)); the drafter was trained on [2, 30, 58]",
        "run 'patcher apply --engine sglang': the patched release captures them")


def test_aux_ids_family_applied_gives_0_5_13_semantics() -> None:
    """When the backport family is applied (or upstream), explicit ids mean what they mean on 0.5.13."""
    base = from_version("sglang", Version("0.5.9"))
    base = replace(base, families=tuple(f for f in base.families if f.family.name != facts.AUX_IDS_FAMILY))
    keys = base.families[0].family
    aux = FamilyState(replace(keys, name=facts.AUX_IDS_FAMILY), "applied", "variant v1 is in place")
    release = replace(base, families=(*base.families, aux))
    cap = facts.aux_capture(release, [3, 31, 57], K2_LAYERS)
    assert cap is not None and (cap.eager, cap.graph) == ([3, 31, 57], [3, 31, 57])
    cap = facts.aux_capture(replace(base, families=(*base.families, replace(aux, state="pending"))),
                            [3, 31, 57], K2_LAYERS)
    assert cap is not None and (cap.eager, cap.graph) == ([4, 32, 58], [2, 30, 58])


def test_vllm_captures_ids_as_given(tmp_path: Path) -> None:
    config = {**eagle3_config(aux=[3, 31, 57]), "eagle_aux_hidden_state_layer_ids": [3, 31, 57]}
    drafter = make_drafter(tmp_path, config=config, prefix="midlayer.")
    _, doc = check_json([str(drafter), "--target", str(make_target(tmp_path))], installed("vllm", "0.18.0"))
    f = {x["code"]: x for x in doc["findings"]}["aux.capture"]
    assert (f["level"], f["message"]) == ("ok", "vllm 0.18.0, v1 runner (the one this launch uses by default; "
                                                "VLLM_USE_V2_MODEL_RUNNER=1 selects v2) captures [3, 31, 57] in "
                                                "eager and graph mode (ids as given)")


# --- fc and use_aux_hidden_state ----------------------------------------------------------

def test_three_layer_fc_with_use_aux_false_is_a_problem(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(use_aux=False), prefix="midlayer.")
    code, doc = check_json([str(drafter), "--target", str(make_target(tmp_path))])
    f = {x["code"]: x for x in doc["findings"]}["config.use_aux_hidden_state"]
    assert (code, f["level"]) == (1, "problem")
    assert f["message"] == ("eagle_config.use_aux_hidden_state is false, but fc.weight takes 24 = 3 x 8 features: "
                            "the engine captures no aux layers, feeds the drafter the last layer only and skips fc "
                            "without a message")


def test_one_layer_drafter_with_use_aux_false_is_fine(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None, use_aux=False), prefix="midlayer.", fc_in=T)
    code, doc = check_json([str(drafter), "--target", str(make_target(tmp_path))])
    assert [f["code"] for f in doc["findings"] if f["level"] == "problem"] == []
    assert code == 0


# --- MLA (DeepSeek-architecture) EAGLE-3 drafters ------------------------------------------

@pytest.mark.parametrize(("engine", "version", "arch", "level", "want_hint"), [
    ("vllm", "0.17.1", "Eagle3DeepseekV2ForCausalLM", "problem", "use vllm 0.18.0 or newer"),
    ("vllm", "0.18.0", "Eagle3DeepseekV3ForCausalLM", "ok", ""),
    ("sglang", "0.5.11", "Eagle3DeepseekV2ForCausalLM", "problem", "use sglang 0.5.12 or newer"),
    ("sglang", "0.5.12", "Eagle3DeepseekV2ForCausalLM", "ok", ""),
    ("sglang", "0.5.23", "Eagle3DeepseekV3ForCausalLM", "problem",
     'SGLang registers the MLA drafter only as "Eagle3DeepseekV2ForCausalLM" (from 0.5.12): rename the architecture'),
])
def test_mla_drafter_architecture(tmp_path: Path, engine: str, version: str, arch: str, level: str,
                                  want_hint: str) -> None:
    config = {**eagle3_config(), "architectures": [arch], "model_type": "deepseek_v3"}  # vLLM runs it as MLA
    drafter = make_drafter(tmp_path, config=config, prefix="midlayer.")
    _, doc = check_json([str(drafter)], installed(engine, version))
    f = {x["code"]: x for x in doc["findings"]}["config.format"]
    assert (f["level"], f["hint"]) == (level, want_hint)


def test_a_release_older_than_the_table_is_unknown_not_unregistered(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    _, doc = check_json([str(drafter), "--target", str(k2_target(tmp_path)), "--engine", "sglang",
                         "--engine-version", "0.4.10"])
    f = {x["code"]: x for x in doc["findings"]}
    assert (f["config.format"]["level"], f["target.architecture"]["level"]) == ("hint", "hint")


# --- fix: exits with what check says of the copy ---------------------------------------------

def test_fix_exits_1_and_lists_what_the_copy_still_gets_wrong(tmp_path: Path) -> None:
    drafter, new = make_drafter(tmp_path, config=speculators_config(aux=[3, 31, 57])), tmp_path / "new"
    code, out, _ = run(["fix", str(drafter), "--out", str(new), "--target", str(k2_target(tmp_path)), "--json",
                        "--engine", "sglang", "--engine-version", "0.5.9"])
    doc = json.loads(out)
    assert (code, doc["exit"]) == (1, 1)
    (aux,) = [p for p in doc["problems"] if p["code"] == "aux.capture"]
    assert aux["found"] == "eager [4, 32, 58], graph [2, 30, 58]"
    assert {p["code"] for p in doc["problems"]} - {"aux.capture"} == {
        p["code"] for p in doc["problems"] if p["code"].startswith("setup.")}  # the rest: the published files
    assert (new / "config.json").is_file()  # the copy is kept


def test_fix_leaves_default_ids_out_where_the_release_moves_them(tmp_path: Path) -> None:
    drafter, new = make_drafter(tmp_path, config=speculators_config()), tmp_path / "new"
    _, out, _ = run(["fix", str(drafter), "--out", str(new), "--target", str(k2_target(tmp_path)),
                     "--engine", "sglang", "--engine-version", "0.5.9"])
    assert ("  aux layer ids [2, 30, 58] left out: they are sglang 0.5.9's default, and written out it would "
            "capture [3, 31, 59] (eager), [2, 30, 58] (graphs)") in out.splitlines()
    assert "eagle_aux_hidden_state_layer_ids" not in json.loads((new / "config.json").read_text())["eagle_config"]


def test_a_rewrite_never_turns_a_problem_into_a_hint() -> None:
    before = [problem("aux.capture", "captures other layers"), problem("keys.decoder_prefix", "skipped")]
    after = [hint("aux.capture", "captures other layers (now only a hint)")]
    (kept,) = still_wrong(before, after)
    assert (kept.code, kept.level) == ("aux.capture", "problem")


def test_fix_output_folder_follows_the_umask(tmp_path: Path) -> None:
    drafter, new = make_drafter(tmp_path), tmp_path / "new"  # a speculators config: rewritten for SGLang
    old = os.umask(0o022)
    try:
        run(["fix", str(drafter), "--out", str(new)], installed("sglang", "0.5.12"))
    finally:
        os.umask(old)
    assert new.stat().st_mode & 0o777 == 0o755
    assert {(p.stat().st_mode & 0o777) for p in new.iterdir()} == {0o644}


# --- launch flags and messages ---------------------------------------------------------------

def test_vllm_takes_speculative_config_with_an_underscore(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="midlayer.")
    flags = """--speculative_config '{"method": "eagle3", "num_speculative_tokens": 3}'"""
    _, doc = check_json([str(drafter), "--engine", "vllm", f"--flags={flags}"])
    f = {x["code"]: x for x in doc["findings"]}["flags.algorithm"]
    assert (f["level"], f["message"]) == ("ok", '"method": "eagle3" matches the EAGLE-3 drafter')
    _, doc = check_json([str(drafter), f"--flags={flags}"])  # and it tells the engine
    assert "flags.algorithm" in {x["code"] for x in doc["findings"]}


@pytest.mark.wheels
def test_no_finding_prints_none(tmp_path: Path) -> None:
    config = eagle3_config()
    del config["hidden_size"]
    config["rope_theta"] = None
    drafter = make_drafter(tmp_path, config=config, prefix="midlayer.")
    code, out, _ = run(["check", str(drafter), "--target", str(make_target(tmp_path))])
    assert code == 1
    assert "None" not in out
    spec = speculators_config()
    del spec["speculators_model_type"]
    other = make_drafter(tmp_path, "spec", config=spec)
    code, out, _ = run(["check", str(other), "--engine", "vllm", "--engine-version", "0.18.0"])
    assert code == 1 and "None" not in out and "found:  (not set)" in out


# --- the tables in facts.py, proven on every covered release ---------------------------

def _trees(engine: str) -> list[tuple[Version, Path]]:
    """Every covered release's tree (fetched when missing): a table proven on no release proves nothing."""
    trees = [(Version(v), wheels.tree(engine, v)) for v in matrix.releases(engine)]
    assert len(trees) > 10, f"{engine}: only {len(trees)} releases covered"
    return trees


def _registers(engine: str, tree: Path, arch: str) -> bool:
    if engine == "vllm":
        return f'"{arch}":' in (tree / "vllm/model_executor/models/registry.py").read_text()
    pattern = re.compile(rf"^class {arch}\(|^{arch} = ", re.M)
    return any(pattern.search(f.read_text(errors="replace")) for f in (tree / "sglang/srt/models").glob("*.py"))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.wheels
def test_registered_since_matches_every_release(engine: str) -> None:
    for version, tree in _trees(engine):
        release = from_version(engine, version)
        for arch in engine_specs.spec(engine).registered_since:
            assert facts.registers(release, arch) == _registers(engine, tree, arch), (version, arch)


@pytest.mark.wheels
def test_sglang_aux_rule_matches_every_release() -> None:
    for version, tree in _trees("sglang"):
        models = (tree / "sglang/srt/models/deepseek_v2.py").read_text()
        if "def set_eagle3_layers_to_capture" not in models:
            assert facts.shift_rule(from_version("sglang", version)) is None, version
            continue
        # CudaGraphRunner.__init__ (and from 0.5.6 ModelRunner._dummy_run): an argument-less re-call.
        recall = any("model.set_eagle3_layers_to_capture()" in f.read_text()
                     for f in (tree / "sglang/srt/model_executor").rglob("*.py"))
        shift = "first-is-1" if "if layer_ids and layer_ids[0] == 1:" in models else "all"
        assert facts.shift_rule(from_version("sglang", version)) == (recall, shift), version


@pytest.mark.wheels
def test_sglang_native_layers0_matches_every_release() -> None:
    # SGLang's since[MAPS_LAYERS0]: from that release the Llama drafter maps layers.0.* itself.
    for version, tree in _trees("sglang"):
        native = "legacy_name_map" in (tree / "sglang/srt/models/llama_eagle3.py").read_text()
        assert (version >= Version(engine_specs.spec("sglang").drafter.since[facts.MAPS_LAYERS0])) == native, version


# --- which aux ids each vLLM runner reads (facts.ids_taken), on every cached release -----------

def test_vllm_runner_id_readers_match_every_release() -> None:
    trees = _trees("vllm")
    assert len(trees) > 10
    for version, tree in trees:
        release = from_version("vllm", version)
        v1_file = tree / "vllm/v1/worker/gpu_model_runner.py"  # removed in 0.34.0
        v1 = v1_file.read_text() if v1_file.is_file() else ""
        assert (facts.V1 in facts.runners(release)) == v1_file.is_file(), version
        v2_dir = tree / "vllm/v1/worker/gpu"
        assert (facts.V2 in facts.runners(release)) == v2_dir.is_dir(), version
        utils = v2_dir / "spec_decode/eagle/eagle3_utils.py"
        v2_aux = utils.is_file() and "eagle_aux_hidden_state_layer_ids" in utils.read_text()
        assert (version >= Version(engine_specs.spec("vllm").drafter.since[facts.V2_AUX])) == v2_aux, version
        v1_reads = 'eagle_config.get("eagle_aux_hidden_state_layer_ids")' in v1
        if v1_file.is_file():
            taken = facts.ids_taken(release, facts.V1, None, [4, 30, 56])
            assert (taken.source == "eagle_config") == v1_reads, version
        if v2_aux:  # v2 never reads the eagle_config copy of the ids
            assert 'get("eagle_aux_hidden_state_layer_ids")' not in utils.read_text(), version
            assert facts.ids_taken(release, facts.V2, None, [4, 30, 56]).source == "default", version


def test_vllm_default_runner_matches_every_release() -> None:
    """The runner a launch without VLLM_USE_V2_MODEL_RUNNER uses, for the DeepSeek-V3/Kimi classes
    and for DeepseekV2ForCausalLM (the name vLLM 0.24.0-0.28.0 list for v2: on the H200, 0.26.0 ran
    such a target on v2 while the check said v1, docs/gpu-proof.md), derived here from each
    release's own files and compared with what the check reads from the installed release."""
    from patcher.environment import engines
    from patcher.release.release import from_install

    for version, tree in _trees("vllm"):
        release = from_install(engines.find("vllm", site=tree))
        config = tree / "vllm/config/vllm.py"
        text = config.read_text() if config.is_file() else ""
        for arch in ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration", "DeepseekV2ForCausalLM"):
            if not (tree / "vllm/v1/worker/gpu_model_runner.py").is_file():
                v2_default = True  # the only runner the release ships (0.34.0)
            elif "def use_v2_model_runner" not in text:
                v2_default = False  # no property: v2 only by VLLM_USE_V2_MODEL_RUNNER=1
            else:
                body = text.split("def use_v2_model_runner", 1)[1].split("\n    def ", 1)[0]
                gate = "_is_default_v2_model_runner_model()" in body
                listed = text.split("DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = ", 1)[1].split(")", 1)[0] if gate else ""
                v2_default = not gate or f'"{arch}"' in listed
            got = facts.default_runner(release, arch)
            assert got == (facts.V2 if v2_default else facts.V1), (version, arch, got)


# --- EAGLE 3.1 switches, on every cached release ----------------------------------------------
# SGLang: its module's eagle31_read_since (the first release whose drafter class reads each switch).
# vLLM: the [[drafter_fact]] entries of patches/vllm/eagle31-switches/patch.toml, the one source the
# check reads (eagle31.switch_outcome and eagle31.switch_read_since); each entry's `published` is derived
# here from the release's own files.

_SGLANG_SWITCH_FILES = {"llama": "sglang/srt/models/llama_eagle3.py", "mla": "sglang/srt/models/kimi_k25_eagle3.py"}


def _reads_switch(path: Path, switch: str) -> bool:
    if not path.is_file():
        return False
    text = path.read_text()
    return f'getattr(self.config, "{switch}"' in text or f'getattr(config, "{switch}"' in text


def test_sglang_eagle31_switch_readers_match_every_release() -> None:
    assert not engine_specs.spec("vllm").drafter.eagle31_read_since, "vLLM's switch facts live in its manifest only"
    for version, tree in _trees("sglang"):
        for kind, rel in _SGLANG_SWITCH_FILES.items():
            for switch in eagle31.EAGLE31_SWITCHES:
                since = engine_specs.spec("sglang").drafter.eagle31_read_since.get(kind, {}).get(switch)
                expected = since is not None and version >= Version(since)
                assert _reads_switch(tree / rel, switch) == expected, (version, kind, switch)


_VLLM_CLASS_FILES = {"Eagle3LlamaForCausalLM": "vllm/model_executor/models/llama_eagle3.py",
                     "Eagle3DeepseekV2ForCausalLM": "vllm/model_executor/models/deepseek_eagle3.py"}
_CONVERTER = "vllm/transformers_utils/configs/speculators/algos.py"


def _vllm_published(tree: Path, key: str, path: str, drafter: str) -> str | None:
    """What the release's files do with ``key`` for this class and config path; None: no such class."""
    cls_file = tree / _VLLM_CLASS_FILES[drafter]
    if not cls_file.is_file():
        return None
    text = cls_file.read_text()
    reads = _reads_switch(cls_file, key)
    combine = text.split("def combine_hidden_states", 1)[1].split("\n    def ", 1)[0] if reads else ""
    # fc_norm builds a module; it is honoured only where combine_hidden_states applies it (0.22.x's
    # DeepSeek class builds and loads it, and never calls it).
    applied = key != "fc_norm" or "fc_norm" in combine
    if key == "norm_output" and reads:  # EAGLE 3.1's meaning: the post-norm state to the next draft step
        assert "aux_output = hidden_states if self.norm_output else hidden_prenorm" in text, (tree, drafter)
    weight = eagle31.SWITCH_WEIGHTS.get(key)
    if path == "speculators":
        converter = tree / _CONVERTER
        line = f'pre_trained_config["{key}"] = config_dict.get("{key}"'
        carried = converter.is_file() and line in converter.read_text()
        if reads and applied and carried:
            return "honoured"
        # Not carried: the class sees the switch off. Its weights either stop the load (no parameter)
        # or are skipped (input_norm., skip list); a switch without weights changes nothing.
        if weight is None or reads:
            return "dropped"
        return "raises-at-load"
    if reads:
        return "honoured" if applied else "unused"
    if weight is None:
        return "dropped"
    # The switch's weights have no parameter: a loader that skips such names (the DeepSeek class's
    # own loop up to 0.24.0) drops them in silence; otherwise the load stops on them.
    return "dropped" if _SKIPS_NAMES_WITHOUT_PARAMETER in text else "raises-at-load"


_SKIPS_NAMES_WITHOUT_PARAMETER = "if name not in params_dict:\n                    continue"


_LOGITS_NORMED = {"vllm": ("vllm/model_executor/models/llama_eagle3.py",
                            "hidden_states, hidden_prenorm = self.norm(hidden_states, residual)"),
                   "sglang": ("sglang/srt/models/llama_eagle3.py",
                              "hidden_states_to_logits, hidden_states_to_aux = self.norm(")}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_norm_output_is_eagle31s_switch_and_lm_head_always_gets_the_normed_state(engine: str) -> None:
    """eagle31.SPECFORGE_NORM_OUTPUT: every release's Llama drafter feeds lm_head the normed state
    (SpecForge 0.2.0's norm_output false has no engine counterpart), and where it reads norm_output,
    true selects the normed state for the next draft step (EAGLE 3.1's meaning)."""
    rel, normed = _LOGITS_NORMED[engine]
    chooses = {"vllm": "aux_output = hidden_states if self.norm_output else hidden_prenorm",
               "sglang": "aux = hidden_states_to_logits if self.norm_output else hidden_states_to_aux"}[engine]
    read_on = 0
    for version, tree in _trees(engine):
        path = tree / rel
        if not path.is_file():
            continue
        text = path.read_text()
        assert normed in text, version
        if _reads_switch(path, "norm_output"):
            assert chooses in text, version
            read_on += 1
    assert read_on > 5


def test_vllm_eagle31_drafter_facts_match_every_release() -> None:
    """Each [[drafter_fact]]'s `published` is what the release's files do, on every covered release;
    every release where the class exists is covered by exactly one entry per key, path and class."""
    (fam,) = [f for f in manifest.load_all(manifest.PATCHES, ("vllm",)) if f.name == facts.EAGLE31_FAMILY]
    triples = {(f.key, f.path, f.drafter) for f in fam.drafter_facts}
    assert len(triples) == 3 + 3 + 3  # speculators -> Llama, config -> Llama, config -> DeepSeek
    checked = 0
    for version, tree in _trees("vllm"):
        for key, path, drafter in sorted(triples):
            covering = [f for f in fam.drafter_facts
                        if (f.key, f.path, f.drafter) == (key, path, drafter) and contains(f.versions, version)]
            derived = _vllm_published(tree, key, path, drafter)
            if derived is None or any(contains(r.versions, version) for r in fam.refused):
                # no such class, or a release the family refuses (the rest of the stack needs 0.11.1):
                # no entry, and the check derives the release's answer from the entries' first honoured one
                assert covering == [], (version, key, path, drafter)
                continue
            assert len(covering) == 1, (version, key, path, drafter, covering)
            assert covering[0].published == derived, (version, key, path, drafter, derived)
            checked += 1
    assert checked > 250
def test_vllm_skips_input_norm_from_0_18_0() -> None:
    for version, tree in _trees("vllm"):
        text = (tree / "vllm/model_executor/models/llama_eagle3.py").read_text()
        # skip_substrs up to 0.28.0; from 0.29.0 a WeightsMapper that maps the prefix to None.
        skips = 'skip_substrs.append("input_norm.")' in text or 'orig_to_new_substr["input_norm."] = None' in text
        assert skips == (version >= Version(engine_specs.spec("vllm").drafter.since[facts.SKIPS_INPUT_NORM])), version


def test_sglang_transformers_major_matches_every_release() -> None:
    # rope.reads_rope_parameters: SGLang reads drafter configs with the transformers it pins.
    for version, tree in _trees("sglang"):
        (meta,) = tree.glob("*.dist-info/METADATA")
        pin = re.search(r"^Requires-Dist: transformers==(\d+)\.", meta.read_text(), re.M)
        assert pin is not None, version
        assert (int(pin.group(1)) >= 5) == rope.reads_rope_parameters(from_version("sglang", version)), version


def test_sglang_eagle_algorithm_facts_hold_on_every_release() -> None:
    """sglang_drafter.EAGLE_ALGORITHM, what --speculative-algorithm EAGLE does with an EAGLE-3 drafter,
    read from each cached SGLang release (issue 32 case 1): the aux capture is set up only under
    is_eagle3(); the worker loads the hot-token map only from --speculative-token-map and hands the
    draft model the target's embed and head; the drafter applies fc only to a hidden state wider than
    its embeddings."""
    trees = _trees("sglang")
    assert len(trees) > 10
    for version, tree in trees:
        spec = " ".join(p.read_text() for p in (tree / "sglang/srt/speculative").glob("*.py"))
        runner = " ".join(p.read_text() for p in (tree / "sglang/srt/model_executor").rglob("*.py"))
        drafter = (tree / "sglang/srt/models/llama_eagle3.py").read_text()
        assert "load_token_map(" in spec and "set_embed_and_head(embed, head)" in spec, version
        assert "is_eagle3()" in runner and "eagle_aux_hidden_state_layer_ids" in runner, version
        assert "if hidden_states.shape[-1] != embeds.shape[-1]:" in drafter, version


def test_vllm_v2_reads_eagle_config_layer_ids_from_the_release_the_facts_name() -> None:
    """Issue 32 case 7: eagle_config["layer_ids"] is the v2 runner's last fallback from 0.27.0
    (get_eagle3_aux_layers_from_config), read on every cached release."""
    since = Version(engine_specs.spec("vllm").drafter.since[facts.V2_EAGLE_LAYER_IDS])
    for version, tree in _trees("vllm"):
        utils = tree / "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
        reads = utils.is_file() and 'drafter_config.get("layer_ids")' in utils.read_text()
        assert reads == (version >= since), version


@pytest.mark.parametrize("engine, version, runner, taken", [
    ("vllm", "0.34.0", "v2", ([3, 30, 57], "eagle_config.layer_ids")),
    ("vllm", "0.26.0", "v2", (None, "default")),
    ("vllm", "0.33.0", "v1", (None, "default")),
    ("sglang", "0.5.23", "", (None, "default")),
])
def test_which_key_each_release_reads_for_eagle_config_layer_ids(engine, version, runner, taken) -> None:
    release = from_version(engine, Version(version))
    got = facts.ids_taken(release, runner, None, None, [3, 30, 57])
    assert (got.ids, got.source) == taken
    if got.ids is None:
        assert "layer_ids" in got.why  # says why the key it states is not read
    # the top level and eagle_config's eagle_aux_hidden_state_layer_ids both win over layer_ids
    if engine == "vllm":
        assert facts.ids_taken(release, runner, [2, 30, 58], None, [3, 30, 57]).ids == [2, 30, 58]
    assert facts.ids_taken(release, runner, None, [4, 30, 56], [3, 30, 57]).ids in ([4, 30, 56], None)


def test_sglang_k25_wrapper_without_the_capture_hook_stops_the_load() -> None:
    """Issue 32 case 8: where sglang/k25-aux-capture is not upstream and the release registers the
    K2.5 wrapper (0.5.9), the wrapper has no set_eagle3_layers_to_capture and the model runner calls
    it for EAGLE3 without a guard: an AttributeError at load, not a server that captures nothing."""
    from patcher.environment import engines
    from patcher.release.release import from_install

    seen = 0
    for version, tree in _trees("sglang"):
        release = from_install(engines.find("sglang", site=tree))
        wrapper = tree / "sglang/srt/models/kimi_k25.py"
        if not wrapper.is_file() or release.state("k25-aux-capture") in (State.UPSTREAM, State.REFUSED):
            continue
        seen += 1
        assert "def set_eagle3_layers_to_capture" not in wrapper.read_text(), version
        runner = (tree / "sglang/srt/model_executor/model_runner.py").read_text()
        assert "self.model.set_eagle3_layers_to_capture(" in runner and "hasattr(self.model, \"set_eagle3" not in runner
        cap = facts.capture(release, "", None, None, facts.K25_TARGET, 61)
        assert cap is not None and cap.stops == "AttributeError", version
    assert seen >= 1


# --- MLA drafter model_type (issue 32, case 5) ---------------------------------------------------

def test_eagle_mla_model_types_on_every_release_with_the_mla_drafter() -> None:
    """vllm_drafter.EAGLE_MLA_MODEL_TYPES (used where no install can be read) is what every release
    with deepseek_eagle3.py names in is_deepseek_mla's EAGLE branch, but AXK1; kimi_k2 never is."""
    seen = 0
    for version, tree in _trees("vllm"):
        if not (tree / "vllm/model_executor/models/deepseek_eagle3.py").is_file():
            continue
        got = vllm_drafter.eagle_mla_model_types(tree)
        assert got is not None and vllm_drafter.EAGLE_MLA_MODEL_TYPES <= got, (version, got)
        assert got - vllm_drafter.EAGLE_MLA_MODEL_TYPES <= {"AXK1", "axk1"}, (version, got)
        assert "kimi_k2" not in got and "kimi_k25" not in got, version
        seen += 1
    assert seen >= 17  # 0.18.0-0.34.0


MLA_MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25")


@pytest.mark.cpuenv
@pytest.mark.parametrize("engine,version", [release_param("vllm", "0.19.1"), release_param("vllm", "0.34.0"),
                                            release_param("vllm", "0.26.0")])
def test_mla_drafter_model_type_as_the_release_runs_it(tmp_path: Path, engine: str, version: str) -> None:
    """The release's own get_config + EAGLEConfig + is_deepseek_mla decide which model_type runs as MLA;
    the syntax-tree fact and drafter check's config.format line agree with it for each model type."""
    import subprocess

    from patcher.maintainer import cpu_env
    from tests.support import real_drafters as rd

    with cpu_env.using(engine, version, log=progress.say) as python:
        proc = subprocess.run([str(python), str(Path(__file__).parent / "support" / "vllm_mla_drafter.py"),
                               *MLA_MODEL_TYPES], capture_output=True, text=True, env=cpu_env.probe_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    engine_says = json.loads(proc.stdout.strip().splitlines()[-1])
    listed = vllm_drafter.eagle_mla_model_types(wheels.tree(engine, version))
    target = rd.kimi_target(tmp_path)
    for model_type in MLA_MODEL_TYPES:
        ran_as_mla = engine_says[model_type]
        if model_type == "kimi_k25":
            assert str(ran_as_mla).startswith("error:"), (model_type, ran_as_mla)  # start-up stops
        else:
            assert ran_as_mla is (model_type in listed), (model_type, ran_as_mla, listed)
        _, found = _check_mla(tmp_path / model_type, target, engine, version, model_type)
        line = found["config.format"]
        assert (line["level"] == "ok") is (ran_as_mla is True), (model_type, line)
    assert engine_says["kimi_k2"] is False and engine_says["deepseek_v3"] is True  # issue 32's case, as seen


def _check_mla(root: Path, target: Path, engine: str, version: str, model_type: str):
    from tests.support import real_drafters as rd
    from tests.test_drafter_real_tools import check

    return check(rd.mla_eagle31(root, model_type=model_type), target, engine, version)


@pytest.mark.cpuenv
@pytest.mark.parametrize("engine,version", [release_param("vllm", "0.19.1"), release_param("vllm", "0.34.0")])
def test_vllm_method_eagle_with_an_hf_eagle3_drafter_as_the_release_runs_it(tmp_path: Path, engine: str,
                                                                            version: str) -> None:
    """Issue 32 case 1 on vLLM: "method": "eagle" with an HF-format EAGLE-3 drafter. The release's own
    EAGLEConfig names the draft EagleLlamaForCausalLMEagle3, which its registry lacks: the server stops
    at start-up, and doctor says so instead of an ok capture line."""
    import subprocess

    from patcher.maintainer import cpu_env
    from tests.support import real_drafters as rd
    from tests.test_drafter_real_tools import check

    with cpu_env.using(engine, version, log=progress.say) as python:
        proc = subprocess.run([str(python), str(Path(__file__).parent / "support" / "vllm_eagle_method.py")],
                              capture_output=True, text=True, env=cpu_env.probe_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert runs == {"eagle": [["EagleLlamaForCausalLMEagle3", False]], "eagle3": [["LlamaForCausalLMEagle3", True]]}
    spec = json.dumps({"method": "eagle", "model": "x", "num_speculative_tokens": 3})
    _, f = check(rd.specforge_kimi(tmp_path), rd.kimi_target(tmp_path), engine, version,
                 "--flags", f"--speculative-config '{spec}'")
    assert f["flags.algorithm"]["level"] == "problem"
    assert "EagleLlamaForCausalLMEagle3" in f["flags.algorithm"]["message"]
    assert "which it does not register: the server stops at start-up" in f["flags.algorithm"]["message"]
    assert f["aux.capture"]["level"] == "problem" and "nothing is captured" in f["aux.capture"]["message"]
    assert f["config.format"]["level"] == "hint"


# --- a rule is a verdict only on a release whose files proved it ------------------------------
# The tables above are proven on every release in releases.txt; on any other release what they
# say is an extrapolation: `unknown` with the rule's word, never `ok` (issue 52: "a rule of ours
# only where nothing can run, and then unknown").

RULED = ("target.architecture", "config.format", "aux.capture", "config.rope")


def _next_release(engine: str) -> str:
    newest = Version(matrix.releases(engine)[-1])
    return f"{newest.major}.{newest.minor}.{newest.micro + 1}"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_rule_is_a_verdict_only_on_a_release_it_is_proven_on(tmp_path: Path, engine: str) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=[2, 30, 58]), prefix="midlayer.")
    target = k2_target(tmp_path)
    said = {}
    for version in (matrix.releases(engine)[-1], _next_release(engine)):
        out = cli("drafter", "check", str(drafter), "--target", str(target), "--engine", engine,
                  "--engine-version", version, "--json")[1]
        said[version] = findings(out)
    covered, beyond = said.values()
    assert [covered[c]["level"] for c in RULED] == ["ok"] * len(RULED)
    for code in RULED:
        f = beyond[code]
        assert f["level"] == "unknown", (code, f)
        assert "own code was not asked" in f["message"], f
    for code in ("target.architecture", "config.format", "config.rope"):  # the rule's word is kept
        assert f"{engine} {_next_release(engine)} is not one of the releases patcher's rules are proven on" \
            in beyond[code]["message"]
        assert beyond[code]["message"].endswith(covered[code]["message"].replace(
            matrix.releases(engine)[-1], _next_release(engine)))
    assert beyond["fc.shape"]["level"] == "ok"  # the checkpoint's own facts need no rule
    # a hint leads where it works: the capture is answered where the engine imports; a registry or
    # RoPE rule is answered nowhere but on a release it is proven on
    assert "where the engine imports" in beyond["aux.capture"]["hint"]
    for code in ("target.architecture", "config.format", "config.rope"):
        assert beyond[code]["hint"].startswith("use a release listed in VERSIONS.md"), beyond[code]


def test_every_release_in_releases_txt_is_proven_and_no_other() -> None:
    for engine in ("vllm", "sglang"):
        listed = matrix.releases(engine)
        assert all(from_version(engine, Version(v)).proven for v in listed)
        assert not from_version(engine, Version(_next_release(engine))).proven
        assert not from_version(engine, None).proven
    between = Version("0.5.9.post9")  # inside the window, never published
    assert str(between) not in matrix.releases("sglang") and not from_version("sglang", between).proven


def test_the_release_s_own_capture_is_a_verdict_where_no_rule_is_proven(tmp_path: Path) -> None:
    """Where the engine imported and answered (the loader child's capture), no rule is needed: the
    answer stays ok on a release past releases.txt; the same call without the answer is unknown."""
    from patcher.drafter.configs import parse_drafter_config, parse_target_config
    from patcher.drafter.release_checks import check_aux_capture

    folder = make_drafter(tmp_path, config=eagle3_config(aux=[2, 30, 58]), prefix="midlayer.")
    drafter = parse_drafter_config(json.loads((folder / "config.json").read_text()), folder)
    target_folder = k2_target(tmp_path)
    target = parse_target_config(json.loads((target_folder / "config.json").read_text()), target_folder)
    newest = from_version("vllm", Version(matrix.releases("vllm")[-1]))
    beyond = replace(newest, version=Version(_next_release("vllm")))  # its files as the newest's
    (runner,) = facts.runners(beyond)
    asked = check_aux_capture(drafter, target, beyond, asked={runner: (2, 30, 58)})
    ruled = check_aux_capture(drafter, target, beyond)
    assert [(f.code, f.level) for f in asked] == [("aux.capture", "ok")]
    assert [(f.code, f.level) for f in ruled] == [("aux.capture", "unknown")]
    assert [f.level for f in check_aux_capture(drafter, target, newest)] == ["ok"]
