"""`patcher doctor` over the grid of issue 32: engine release x target architecture x speculative
algorithm x drafter provenance x aux-id key placement, each cell with its expected verdict.

Every cell runs doctor on a copy of the published tree after 'patcher apply' (``--site``), with
drafters laid out as the tools write them (tests/support/real_drafters.py): SpecForge 0.2.0 (ids in
``eagle_config``), speculators 0.9.0 (ids at the top level, its EAGLE 3.1 defaults), and a hand-built
config with trained ids [4, 30, 56] (not the engines' default [2, 30, 58], so that where an engine
reads them matters) in each placement. ``expected`` below is the table, written from the facts, not
from doctor's output.

Beyond the verdict: no line says ``ok`` unless its fact is proven. A release fact names the wheel
test that proves it (``PROVEN_BY``, checked to exist); a fact of the drafter's and target's own files
(``FILE_FACTS``) must read the same on every release of the grid.
"""

from __future__ import annotations

import importlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from patcher.cli.main import main
from patcher.maintainer import wheels
from tests.support import real_drafters as rd
from tests.support.tiers import SAMPLE, release_param

# The default tier's releases (tests/support/tiers.py: the newest of each CPU env line), then more in --full.
RELEASES = [release_param(e, v) for e, v in sorted(SAMPLE)] + [
    release_param(e, v) for e, v in (("sglang", "0.5.13.post1"), ("vllm", "0.22.1"), ("vllm", "0.26.0"),
                                     ("vllm", "0.30.0"))]
TARGETS = ("kimi-k2.5", "kimi-k2", "kimi-k3", "qwen3-moe")
COVERED_TARGETS = ("kimi-k2.5", "kimi-k2")  # KimiK25ForConditionalGeneration, DeepseekV3ForCausalLM
ALGORITHMS = ("eagle3", "eagle", "dflash")
DRAFTERS = ("specforge", "speculators", "hand/eagle_config", "hand/top-level", "hand/both", "hand/disagree")
TRAINED_IDS = [4, 30, 56]
# Eagle3LlamaForCausalLM reads norm_output from 0.22.0 (test_vllm_eagle31_drafter_facts_match_every_release).
VLLM_READS_NORM_OUTPUT = Version("0.22.0")

# Release facts behind every `ok` line the grid prints: (module, test) proving it on the wheels.
PROVEN_BY = {
    "launch.engine": ("tests.test_engines", None),  # the installed distribution, read from its RECORD
    "launch.runner": ("tests.test_drafter_release", "test_vllm_default_runner_matches_every_release"),
    "env.VLLM_USE_V2_MODEL_RUNNER": ("tests.test_launch_facts", "test_vllm_env_defaults"),
    "env.VLLM_ALLREDUCE_USE_FLASHINFER": ("tests.test_launch_facts", "test_vllm_env_defaults"),
    "launch.allreduce_fusion": ("tests.test_launch_facts", "test_auto_fusion_targets_and_gpus"),
    "target.architecture": ("tests.test_drafter_release", "test_registered_since_matches_every_release"),
    "config.format": ("tests.test_drafter_release", "test_mla_drafter_model_type_as_the_release_runs_it"),
    "aux.capture": ("tests.test_drafter_release", "test_vllm_runner_id_readers_match_every_release"),
    "aux.capture.v1": ("tests.test_drafter_release", "test_vllm_runner_id_readers_match_every_release"),
    "aux.capture.v2": ("tests.test_drafter_release",
                       "test_vllm_v2_reads_eagle_config_layer_ids_from_the_release_the_facts_name"),
    "env.SGLANG_ENABLE_SPEC_V2": ("tests.test_launch_facts", "test_sglang_spec_v2_env_default"),
    "aux.capture.graph": ("tests.test_drafter_release", "test_sglang_aux_rule_matches_every_release"),
    "config.rope": ("tests.test_drafter_release", "test_sglang_transformers_major_matches_every_release"),
    "keys.load": ("tests.test_drafter_loader", "test_the_check_says_what_the_loader_does"),
    "flags.algorithm": ("tests.test_drafter_release", "test_sglang_eagle_algorithm_facts_hold_on_every_release"),
    "eagle31.norm_before_fc": ("tests.test_drafter_release", "test_vllm_eagle31_drafter_facts_match_every_release"),
    "eagle31.norm_output": ("tests.test_drafter_release", "test_vllm_eagle31_drafter_facts_match_every_release"),
    "eagle31.fc_norm": ("tests.test_drafter_release", "test_vllm_eagle31_drafter_facts_match_every_release"),
    "launch.parse": ("tests.test_doctor_spellings",
                     "test_every_spelling_the_release_accepts_is_judged_as_the_canonical_line"),
    "launch.mtp": ("tests.test_launch_facts", "test_mtp_methods_and_targets_are_read_from_every_release"),
}
# Facts of the drafter's files and the target's config: the same whatever the release.
FILE_FACTS = ("launch.target", "launch.drafter", "aux.layer_ids", "fc.shape", "vocab.d2t", "vocab.lm_head",
              "shape.attention", "dtype", "context.rope", "vocab.embed_tokens")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def expected(engine: str, version: str, target: str, algorithm: str, drafter: str) -> tuple[str, set[str]]:
    """The verdict, and the codes among the reasons that must be there (problem or unknown). A
    problem makes it no-go; unknown lines alone make it 'cannot tell' (exit 3), never go."""
    if algorithm == "dflash":
        return "cannot tell", {"flags.algorithm"}  # unknown: nothing of DFLASH is checked
    problems, unknowns = set(), set()
    # a bare tree: the release's loader cannot run, so whether the drafter's keys load is not proven
    # (issue 52); tests/test_drafter_loader.py judges them where the engine imports
    unknowns.add("keys.load")
    if target not in COVERED_TARGETS:
        unknowns.add("target.architecture")  # no fact covers K3 or Qwen3-MoE
    if algorithm == "eagle":  # no aux capture under EAGLE-1 (SGLang), an unregistered class (vLLM, HF format)
        problems |= {"flags.algorithm"} | ({"aux.capture"} if target in COVERED_TARGETS else set())
    if engine == "sglang" and drafter == "speculators":
        problems.add("config.format")  # SGLang never parses a speculators config
    if engine == "vllm" and drafter == "speculators" and Version(version) < VLLM_READS_NORM_OUTPUT:
        problems.add("eagle31.norm_output")  # speculators' default norm_output: true, refused before 0.22.0 (W1-W4)
    if engine == "sglang" and drafter == "hand/top-level" and target in COVERED_TARGETS:
        problems.add("aux.capture")  # SGLang reads the ids only from eagle_config: the default is captured
    if drafter == "hand/disagree":
        problems.add("aux.ids_keys")  # two id lists: which one the drafter was trained on is unknown
    verdict = "no-go" if problems else "cannot tell" if unknowns else "go"
    return verdict, problems | unknowns


EXIT = {"go": 0, "no-go": 1, "cannot tell": 3}


def _targets(root: Path) -> dict[str, Path]:
    out = {"kimi-k2.5": rd.kimi_target(root), "kimi-k2": rd.kimi_target(root, "kimi-k2", k25=False)}
    for name, arch, model_type in (("kimi-k3", "KimiK3ForConditionalGeneration", "kimi_k3"),
                                   ("qwen3-moe", "Qwen3MoeForCausalLM", "qwen3_moe")):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps({"architectures": [arch], "model_type": model_type,
                                                             "hidden_size": rd.KIMI_HIDDEN, "num_hidden_layers": 61,
                                                             "vocab_size": rd.KIMI_VOCAB}))
        out[name] = root / name
    return out


def _hand_built(root: Path, placement: str) -> Path:
    """SpecForge's tensors under a config.json written by hand, the trained ids where ``placement`` says."""
    folder = rd.specforge_kimi(root, f"hand-{placement}")
    config = json.loads((folder / "config.json").read_text())
    eagle = config["eagle_config"]
    eagle.pop("eagle_aux_hidden_state_layer_ids", None)
    if placement in ("eagle_config", "both", "disagree"):
        eagle["eagle_aux_hidden_state_layer_ids"] = TRAINED_IDS
    if placement in ("top-level", "both"):
        config["eagle_aux_hidden_state_layer_ids"] = TRAINED_IDS
    if placement == "disagree":
        config["eagle_aux_hidden_state_layer_ids"] = [2, 30, 58]
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _drafters(root: Path) -> dict[str, Path]:
    out = {"specforge": rd.specforge_kimi(root), "speculators": rd.speculators_kimi(root)}
    for placement in ("eagle_config", "top-level", "both", "disagree"):
        out[f"hand/{placement}"] = _hand_built(root, placement)
    return out


def _launch(engine: str, target: Path, algorithm: str, drafter: Path) -> list[str]:
    if engine == "sglang":
        return ["python", "-m", "sglang.launch_server", "--model-path", str(target), "--speculative-algorithm",
                algorithm.upper(), "--speculative-draft-model-path", str(drafter)]
    spec = {"method": algorithm, "model": str(drafter), "num_speculative_tokens": 3}
    return ["vllm", "serve", str(target), "--speculative-config", json.dumps(spec)]


FILE_TEXT: dict[tuple[str, str, str, str], str] = {}  # (engine, target, drafter, code) -> its ok message


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), RELEASES)
def test_every_cell_of_the_grid(tmp_path: Path, engine: str, version: str) -> None:
    site = tmp_path / "site"
    shutil.copytree(wheels.tree(engine, version), site)
    assert cli("apply", "--engine", engine, "--site", str(site), "--no-probes")[0] == 0
    targets, drafters = _targets(tmp_path), _drafters(tmp_path)
    wrong, unproven = [], set()
    for (tname, target), alg, (dname, drafter) in ((t, a, d) for t in targets.items() for a in ALGORITHMS
                                                    for d in drafters.items()):
        code, out, err = cli("doctor", "--json", "--site", str(site), "--", *_launch(engine, target, alg, drafter))
        doc = json.loads(out)
        verdict, must = expected(engine, version, tname, alg, dname)
        said = {f["code"]: f for f in doc["findings"]}
        reasons = {c for c, f in said.items() if f["level"] in ("problem", "unknown")}
        cell = f"{engine} {version} {tname} {alg} {dname}"
        if (doc["verdict"], code) != (verdict, EXIT[verdict]) or not must <= reasons:
            wrong.append(f"{cell}: {doc['verdict']} {sorted(reasons)}; wanted {verdict} with {sorted(must)}")
        if alg != "eagle3" or tname not in COVERED_TARGETS:
            capture = [c for c, f in said.items() if c.startswith("aux.capture") and f["level"] == "ok"]
            if capture:
                wrong.append(f"{cell}: {capture} ok where nothing proven is captured")
        for c, f in said.items():
            if f["level"] != "ok":
                continue
            if c in FILE_FACTS:
                text = re.sub(rf"{engine} {re.escape(version)}", "RELEASE", f["message"]).replace(str(tmp_path), "TMP")
                if alg == "eagle3":
                    FILE_TEXT.setdefault((engine, tname, dname, c), text)
                    if FILE_TEXT[(engine, tname, dname, c)] != text:
                        wrong.append(f"{cell}: {c} reads differently by release: {text!r}")
            elif c not in PROVEN_BY:
                unproven.add(c)
    assert not wrong, "\n".join(wrong[:20]) + f"\n({len(wrong)} cells wrong)"
    assert not unproven, f"ok lines without a named wheel proof: {sorted(unproven)}"


def test_every_named_proof_exists() -> None:
    for code, (module, test) in PROVEN_BY.items():
        mod = importlib.import_module(module)
        assert test is None or callable(getattr(mod, test, None)), f"{code}: {module}.{test} does not exist"


def _sglang(target: Path, *rest: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", str(target), *rest]


def _vllm(target: Path, spec: dict | None, *rest: str) -> list[str]:
    return ["vllm", "serve", str(target), *(["--speculative-config", json.dumps(spec)] if spec else []), *rest]


def _classes(engine: str, root: Path) -> dict[str, tuple[list[str], str, dict[str, str]]]:
    """Issue 46's classes, as launch lines: (line, the verdict, {code: level} that must be said).
    The option-table class (prefixes, aliases, --config) is tests/test_doctor_spellings.py."""
    k2, k25, v3 = rd.kimi_target(root, "k2", k25=False), rd.kimi_target(root, "k25"), rd.deepseek_v3_target(root)
    eagle3, moe = rd.specforge_kimi(root), rd.torchspec_kimi_moe(root)
    if engine == "sglang":
        return {
            "NEXTN on Kimi-K2 (no MTP layer)": (_sglang(k2, "--speculative-algorithm", "NEXTN"), "no-go",
                                                 {"launch.mtp": "problem"}),
            "EAGLE without a drafter is MTP: DeepSeek-V3": (_sglang(v3, "--speculative-algorithm", "EAGLE"), "go",
                                                            {"launch.mtp": "ok"}),
            "NGRAM: not checked": (_sglang(k2, "--speculative-algorithm", "NGRAM"), "cannot tell",
                                   {"flags.algorithm": "unknown"}),
            "SGLANG_ENABLE_SPEC_V2=maybe": (["SGLANG_ENABLE_SPEC_V2=maybe", *_sglang(
                k2, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(eagle3))],
                "cannot tell", {"env.SGLANG_ENABLE_SPEC_V2": "hint", "keys.load": "unknown"}),
            "TorchSpec MoE drafter": (_sglang(k25, "--speculative-algorithm", "EAGLE3",
                                              "--speculative-draft-model-path", str(moe)), "no-go",
                                      {"shape.mlp": "problem"}),
        }
    spec = {"method": "eagle3", "model": str(eagle3), "num_speculative_tokens": 3}
    return {
        "deepseek_mtp on Kimi-K2 (no MTP layer)": (_vllm(k2, {"method": "deepseek_mtp", "num_speculative_tokens": 1}),
                                                   "no-go", {"launch.mtp": "problem"}),
        "deepseek_mtp on DeepSeek-V3": (_vllm(v3, {"method": "deepseek_mtp", "num_speculative_tokens": 1}), "go",
                                        {"launch.mtp": "ok"}),
        "ngram: not checked": (_vllm(k2, {"method": "ngram", "num_speculative_tokens": 3}), "cannot tell",
                               {"flags.algorithm": "unknown"}),
        "VLLM_USE_V2_MODEL_RUNNER=true": (["VLLM_USE_V2_MODEL_RUNNER=true", *_vllm(k2, spec)], "no-go", {}),
        "TorchSpec MoE drafter": (_vllm(k25, dict(spec, model=str(moe))), "no-go", {"shape.mlp": "problem"}),
    }


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), [release_param(e, v) for e, v in sorted(SAMPLE)])
def test_methods_environment_values_and_moe_drafters(tmp_path: Path, engine: str, version: str) -> None:
    """Issue 46 classes 1, 3 and 4 on both engines: every method the release accepts is placed
    (MTP judged on the target's MTP layers, others 'cannot tell'), an environment value is read
    as the release parses it, and a MoE drafter (TorchSpec) is refused: both engines build a
    dense MLP for EAGLE-3 drafters."""
    site = tmp_path / "site"
    shutil.copytree(wheels.tree(engine, version), site)
    assert cli("apply", "--engine", engine, "--site", str(site), "--no-probes")[0] == 0
    wrong = []
    for label, (line, verdict, said) in _classes(engine, tmp_path).items():
        code, out, err = cli("doctor", "--json", "--site", str(site), "--", *line)
        doc = json.loads(out)
        levels = {f["code"]: f["level"] for f in doc["findings"]}
        if (doc["verdict"], code) != (verdict, EXIT[verdict]) or any(levels.get(c) != lv for c, lv in said.items()):
            wrong.append(f"{label}: {doc['verdict']} {doc['reasons']}")
        unproven = {c for c, lv in levels.items() if lv == "ok" and c not in PROVEN_BY and c not in FILE_FACTS}
        if unproven:
            wrong.append(f"{label}: ok lines without a named wheel proof: {sorted(unproven)}")
        if label.startswith("VLLM_USE_V2_MODEL_RUNNER") and not any(
                levels.get(c) == "problem" for c in ("env.VLLM_USE_V2_MODEL_RUNNER", "launch.runner")):
            wrong.append(f"{label}: the value the release cannot parse is not a reason: {levels}")
    assert not wrong, "\n".join(wrong)
