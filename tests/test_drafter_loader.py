"""The key findings are the release's own loader's answer (issue 52), proven the way they failed.

Each release of the tiers gets the generated grid (tests/support/tiny_drafters.py: every tool's
layout, every tensor dropped in turn, buffers the loaders know and ones they do not, the other
prefixes, a shape that does not fit), published and patched. The truth is the oracle
(tests/support/loader_oracle.py): the release's own iterator and load path on the real random
tensors, and afterwards which tensor's values each parameter holds. ``drafter check`` must say the
same on every case: refused at load, loaded unlike training (a parameter left random, a trained
tensor read into nothing), or loaded as trained; where the loader cannot be asked, "cannot tell".

On a GPU (docs/gpu-proof.md) the same check met the engine: the two rows that were wrong before are
``test_the_gpu_rows_are_what_the_check_says``.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from patcher.cli.main import main
from patcher.drafter import checks, facts
from patcher.drafter.checkpoint import read_checkpoint
from patcher.drafter.checks import check_drafter
from patcher.drafter.configs import parse_drafter_config, parse_target_config
from patcher.drafter.eagle31 import SWITCH_WEIGHTS
from patcher.drafter.release_checks import check_aux_capture
from patcher.environment import engines
from patcher.findings import Finding
from patcher.release import release_loader
from patcher.release.release import from_install, located_by
from tests.support import progress, recorded
from tests.support import tiny_drafters as tiny

pytestmark = [pytest.mark.wheels, pytest.mark.cpuenv]

AS_TRAINED, UNLIKE, REFUSED, CANNOT_TELL = "as trained", "unlike training", "refused", "cannot tell"
# Tensors a trainer writes that no release needs to load: the rotary tables the engine computes
# from the config, KV-cache scales (only an fp8 KV cache reads them), speculators' verifier copies.
HARMLESS = ("rotary_emb.inv_freq", "rotary_emb.cos_cached", "k_scale", "verifier_")
ORACLE = Path(__file__).parent / "support" / "loader_oracle.py"

# Which layouts each engine is given: SGLang reads no speculators config, so the speculators
# tensors come under an HF config there (the GPU toolkit's drafter, or 'drafter fix''s copy).
LAYOUTS = {"sglang": ("speculators-hf", "specforge", "mla"), "vllm": ("speculators", "specforge", "mla")}
# The newest release of each engine in the default tier; in --full the releases where a drafter
# loader changes (SGLang: layers.0.* mapped and fc_norm read from 0.5.12, input_norm 0.5.17; vLLM: the
# MLA drafter from 0.18, the v2 runner the default from 0.29), the GPU-proof release 0.5.13.post1, and
# SGLang 0.5.7, whose CPU path the CPU env cannot build. Run on 2 cores, each release costs 1-2 minutes
# (one engine import per state for the check, one for the oracle): every release would be 40 more.
# Identity cannot stand in for a run (measured 6 December, the oracle tracing every function call from
# the drafter's model code to the end of its load): the 126 SGLang and 150 vLLM files it runs differ
# between nearly every two releases (40 classes of identical bytes among 42 SGLang releases, 37 among
# 40 vLLM ones; still 37 and 30 counting only models/ and model_loader/).
DEFAULT = {("sglang", "0.5.23"), ("vllm", "0.34.0")}
RELEASES = [("sglang", "0.5.23"), ("vllm", "0.34.0"), ("sglang", "0.5.7"), ("sglang", "0.5.11"),
            ("sglang", "0.5.12"), ("sglang", "0.5.13.post1"), ("sglang", "0.5.17"), ("vllm", "0.18.1"),
            ("vllm", "0.29.0")]


def _param(engine: str, version: str):
    marks = () if (engine, version) in DEFAULT else (pytest.mark.full,)
    return pytest.param(engine, version, marks=marks, id=f"{engine}-{version}")


def check_verdict(findings: list[Finding], names: list[str]) -> tuple[str, str]:
    by = {f.code: f for f in findings}
    load = by.get("keys.load")
    if load is not None and load.level == "unknown":
        return CANNOT_TELL, load.message
    if load is not None and load.level == "problem":
        return REFUSED, load.found
    # An EAGLE 3.1 switch whose weights the checkpoint carries: whether those load is what the
    # loader shows. Without them the switch's finding is about the forward pass (vLLM 0.18.1 runs
    # no input_norm whatever the config says), which no loader shows.
    weighted = {f"eagle31.{switch}" for switch, prefix in SWITCH_WEIGHTS.items()
                if any(n.startswith(prefix) or f".{prefix}" in n for n in names)}
    bad = [f for f in findings if f.level == "problem" and f.code in {"keys.unloaded", "keys.dropped", *weighted}]
    return (UNLIKE, "; ".join(f"{f.code}: {f.found}" for f in bad)) if bad else (AS_TRAINED, "")


def oracle_verdict(got: dict, tensors: dict) -> tuple[str, str]:
    if "error" in got:
        return (CANNOT_TELL if got.get("stage") == "unavailable" else REFUSED), got["error"]
    random = [n for n, p in got["params"].items() if not p["target"] and p["filled"] < 0.999]
    floats = [n for n, (_, dtype) in tensors.items() if dtype in ("BF16", "F32")]
    lost = [n for n in floats if n not in got["found"] and not any(h in n for h in HARMLESS)]
    if random or lost:
        return UNLIKE, f"random {random}; lost {lost}"
    return AS_TRAINED, ""


def _oracle(python: Path, engine: str, asks: list[dict]) -> list[dict]:
    from patcher.maintainer import cpu_env

    child = release_loader._script(f"{engine}/loader_child.py")
    request = json.dumps({"engine": engine, "child": child, "asks": asks})
    proc = subprocess.run([str(python), str(ORACLE)], input=request, capture_output=True, text=True,
                          env={**cpu_env.probe_env(), **recorded.ORACLE_ENV}, timeout=1800, cwd="/tmp")
    got = [json.loads(line.split(" ", 1)[1]) for line in proc.stdout.splitlines() if line.startswith("@@oracle@@ ")]
    assert len(got) == len(asks), proc.stderr[-3000:]
    return got


def _grid(root: Path, engine: str, write: bool = True) -> list[tuple[tiny.Case, Path, dict]]:
    layouts = tiny.layouts()
    out = []
    for name in LAYOUTS[engine]:
        for i, case in enumerate(tiny.cases(layouts[name])):
            folder = tiny.write(root / name / str(i), layouts[name], case) if write else root / name / str(i)
            out.append((case, folder, case.mutate(dict(layouts[name].tensors))))
    return out


def name_rule_verdict(ckpt, release) -> str:
    """What the key-name rules (the check before issue 52) said of the keys: the mutation the grid
    must catch is putting them back in the loader's place."""
    said = checks._check_decoder_keys(ckpt, release) + checks._check_unknown_keys(ckpt, release)
    return UNLIKE if any(f.level == "problem" for f in said) else AS_TRAINED


def _ids_grid(root: Path, engine: str, write: bool = True) -> list[tuple[str, Path]]:
    """The well-formed drafter of each layout with its aux ids stated each way (tiny.id_variants)."""
    layouts = tiny.layouts()
    out = []
    for name in LAYOUTS[engine]:
        for i, (what, config) in enumerate(tiny.id_variants(layouts[name]).items()):
            folder = root / name / f"ids{i}"
            if write:
                tiny.write(folder, layouts[name], tiny.cases(layouts[name])[0])
                (folder / "config.json").write_text(json.dumps(config, indent=1))
            out.append((f"{name}/{what}", folder))
    return out


def _capture_rows(release, target: Path, ids_grid: list[tuple[str, Path]], answers) -> list[dict]:
    """Per drafter and runner: what the release's own code captured (``LoadAnswer.capture``), what the
    check says with it, what the check says with a wrong rule in its place (every id one higher),
    and what the rules alone say (they stay for where nothing runs)."""
    target_config = parse_target_config(json.loads((target / "config.json").read_text()), target / "config.json")
    runners = facts.runners(release) if facts.reading(release).model_runners else ("",)
    real = facts.capture

    def wrong_rule(*args, **kwargs):
        got = real(*args, **kwargs)
        return got if got is None else replace(got, eager=[i + 1 for i in got.eager])

    def message(findings, runner):
        return next((f.message for f in findings if f.code in ("aux.capture", f"aux.capture.{runner}")
                     and (not runner or f"{runner} runner" in f.message)), "")

    rows = []
    for (what, folder), answer in zip(ids_grid, answers):
        ckpt = read_checkpoint(folder)
        drafter = parse_drafter_config(ckpt.config, folder / "config.json")
        said = check_aux_capture(drafter, target_config, release, asked=answer.capture)
        facts.capture = wrong_rule
        try:
            fooled = check_aux_capture(drafter, target_config, release, asked=answer.capture)
        finally:
            facts.capture = real
        for runner in runners:
            rule = real(release, runner, drafter.top_aux_ids and list(drafter.top_aux_ids),
                        drafter.eagle_aux_ids and list(drafter.eagle_aux_ids), target_config.architectures[0],
                        target_config.num_hidden_layers)
            rows.append({"drafter": f"{target.name}: {what}", "runner": runner, "loaded": answer.status == "loaded",
                         "asked": answer.capture.get(runner, f"not asked: {answer.capture}"),
                         "says": message(said, runner), "fooled": message(fooled, runner),
                         "rule": None if rule is None or rule.nothing else tuple(rule.eager)})
    return rows


def _has_k25(install) -> bool:
    """The release has a Kimi-K2.5 model class (read from its files)."""
    models = install.site / install.package
    return any("class KimiK25ForConditionalGeneration" in f.read_text(errors="replace")
               for f in models.rglob("models/kimi_k25*.py"))


def _judge_all(python: Path, engine: str, root: Path,
               fresh: bool) -> tuple[list[tuple[str, tuple[str, str], tuple[str, str], str]], list[tuple]]:
    """(case, what the check says, what the oracle saw, what the name rules said) for every case, and
    the capture rows (``_capture_rows``) of the aux-id grid, asked of the same interpreter. The
    drafters are settled at a path named by their bytes (``recorded.settled``), so the loader's
    answers of an earlier run are found again; the oracle's truth is recorded, and computed afresh
    (and compared with the record) where ``fresh``."""
    tiny.write_target(root / "target")
    tiny.write_k25_target(root / "target-k25")
    _grid(root / "drafters", engine)
    _ids_grid(root / "ids", engine)
    root = recorded.settled(root)
    target = root / "target"
    grid = _grid(root / "drafters", engine, write=False)
    ids_grid = _ids_grid(root / "ids", engine, write=False)
    install = engines.find(engine, python=str(python))
    release = replace(from_install(install), located_by=located_by(str(python), None))
    spec = release.spec
    # The capture is asked for Kimi-K2 and, where the release has the class, Kimi-K2.5, whose wrapper
    # hands the setters to the text model it builds (loader_child_common.bare_target).
    targets = [target] + ([root / "target-k25"] if _has_k25(install) else [])
    asks = [(folder, target) for _, folder, _ in grid] + [(f, t) for t in targets for _, f in ids_grid]
    questions = []
    for folder, to in asks:
        ckpt = read_checkpoint(folder)
        header = {n: (i.dtype, tuple(i.shape)) for n, i in ckpt.tensors.items()}
        questions.append(release_loader.Ask(folder, header, spec.drafter.loader_argv(str(to), str(folder)), to))
    answers = release_loader.ask_many(engine, str(python), install.site, questions)  # one import answers them all
    captures = [row for i, to in enumerate(targets)
                for row in _capture_rows(release, to, ids_grid, answers[len(grid) + i * len(ids_grid):])]
    questions = questions[:len(grid)]
    asked = [{**q.request(), "files": [str(q.drafter / "model.safetensors")]} for q in questions]
    inputs = [ORACLE.read_text(), release_loader._script(f"{engine}/loader_child.py"),
              json.dumps(asked, sort_keys=True), *recorded.release_parts(install)]
    truth = recorded.truth("loader-oracle", inputs, lambda: _oracle(python, engine, asked), fresh=fresh)
    target_config = parse_target_config(json.loads((target / "config.json").read_text()), target / "config.json")
    rows = []
    for (case, folder, tensors), got in zip(grid, truth):
        ckpt = read_checkpoint(folder)
        drafter = parse_drafter_config(ckpt.config, folder / "config.json")
        findings = check_drafter(ckpt, drafter, target_config, release, None, target_folder=target)
        rows.append((case.name, check_verdict(findings, list(tensors)), oracle_verdict(got, tensors),
                     name_rule_verdict(ckpt, release)))
    return rows, captures


def _assert_capture_asked(captures: dict[str, list[dict]]) -> None:
    """Wherever the drafter loads, the release's own code answered the capture of every runner it
    ships, the check says those layers (also with a wrong rule in place of the rules), and the rules
    kept for where nothing runs agree with the code."""
    rows = [(state, row) for state, rs in captures.items() for row in rs
            if row["loaded"] or isinstance(row["asked"], tuple)]  # 0.5.7: its code answers, its loader cannot
    assert rows, "the capture was never asked"
    unasked = [f"{state} {r['drafter']} {r['runner']}: {r['asked']}" for state, r in rows
               if not isinstance(r["asked"], tuple)]
    assert not unasked, "the release's code was not asked:\n" + "\n".join(unasked)
    wrong = [f"{state} {r['drafter']} {r['runner']}: asked {list(r['asked'])}, check says {r['says']!r}"
             for state, r in rows for said in (r["says"], r["fooled"])
             if f"captures {list(r['asked'])} in eager" not in said]
    assert not wrong, "the check does not say what the release's code captures:\n" + "\n".join(wrong)
    stale = [f"{state} {r['drafter']} {r['runner']}: the code captures {list(r['asked'])}, the rule says {r['rule']}"
             for state, r in rows if r["rule"] != r["asked"]]
    assert not stale, "a rule kept for where nothing runs disagrees with the release's code:\n" + "\n".join(stale)


def _cli(*argv: str) -> int:
    import io

    return main(list(argv), out=io.StringIO(), err=io.StringIO())


@pytest.mark.parametrize("engine,version", [_param(e, v) for e, v in RELEASES])
def test_the_check_says_what_the_loader_does(tmp_path: Path, engine: str, version: str) -> None:
    from patcher.maintainer import cpu_env

    with cpu_env.using(engine, version, log=progress.say) as python:
        _cli("revert", "--engine", engine, "--python", str(python), "--no-probes")
        k25 = _has_k25(engines.find(engine, python=str(python)))
        fresh = (engine, version) in DEFAULT  # the default tier's cells compare the record with a fresh truth
        states, captures = {}, {}
        states["published"], captures["published"] = _judge_all(python, engine, tmp_path / "published", fresh)
        applied = _cli("apply", "--engine", engine, "--python", str(python), "--no-probes")
        try:
            states["patched"], captures["patched"] = _judge_all(python, engine, tmp_path / "patched", fresh)
        finally:
            _cli("revert", "--engine", engine, "--python", str(python), "--no-probes")
    assert applied in (0, 1)
    _assert_capture_asked(captures)
    assert not k25 or any(r["drafter"].startswith("target-k25:") and isinstance(r["asked"], tuple)
                          for rows in captures.values() for r in rows), "Kimi-K2.5's capture was not asked"
    wrong = [f"{state} {name}: check says {said}, the loader did {truth}"
             for state, rows in states.items() for name, said, truth, _ in rows if said[0] != truth[0]]
    assert not wrong, f"{len(wrong)} of {sum(map(len, states.values()))} disagree:\n" + "\n".join(wrong)
    asked = [row for rows in states.values() for row in rows if row[2][0] != CANNOT_TELL]
    if version == "0.5.7":  # its CPU path builds vLLM's modules, which the SGLang env lacks: only the
        # registry answers (it has no MLA drafter class); every Llama drafter is "cannot tell"
        assert {row[0].split("/")[0] for row in asked} == {"mla"}
        return
    assert asked, "the loader was never asked"
    # The MLA head (Kimi's own drafter class) is asked too: SGLang's CPU rotary once made every one
    # "cannot tell", and nothing failed (the loader child builds the rotary as a GPU does).
    assert "mla" in {row[0].split("/")[0] for row in asked}, "the MLA drafter's loader was never asked"
    # The grid tells the loader from a list of names: put the name rules back, and it fails.
    fooled = [name for name, _, truth, rule in asked if (truth[0] == AS_TRAINED) != (rule == AS_TRAINED)]
    assert fooled, "no case of the grid tells the loader's answer from the key-name rules"
    if (engine, version) == ("sglang", "0.5.13.post1"):  # the two rows the GPU found (docs/gpu-proof.md)
        gpu = {(state, name): said[0] for state, rows in states.items() for name, said, _, _ in rows}
        assert gpu["published", "speculators-hf/without layers.0.mlp.down_proj.weight"] == UNLIKE
        assert gpu["patched", "speculators-hf/without layers.0.mlp.down_proj.weight"] == REFUSED
        assert gpu["published", "speculators-hf/with rotary inv_freq"] == AS_TRAINED
        assert gpu["patched", "speculators-hf/with rotary inv_freq"] == AS_TRAINED
