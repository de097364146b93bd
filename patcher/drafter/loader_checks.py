"""``keys.*`` findings: what the release's own loader did with the checkpoint (issue 52).

The verdict is the loader's answer (``patcher.release.release_loader``), never a list of names:
- it raised: the server stops at load, in the release's words (``keys.load``, a problem);
- a parameter no key filled, wholly or in part (a missing v shard), and the engine does not put the
  target's weights there afterwards: it runs at its random initial values (``keys.unloaded``);
- a floating-point tensor whose values reached nothing: the drafter was trained with it and runs
  without it (``keys.dropped``), unless the model holds a module that computes it itself (a rotary
  buffer: ``keys.computed``), it is a KV-cache quantisation scale (used only with an fp8 KV cache:
  ``keys.kv_scale``, a hint), or a copy of the verifier's head speculators keeps for training;
- integer tensors (d2t, t2d) are vocabulary maps, not weights: where the model keeps one
  (SGLang's ``hot_token_id``) the answer says so.

Where the loader cannot be asked (the engine does not import there; a release named by
``--engine-version`` alone), nothing of it is proven: ``keys.load`` is ``unknown``, never ``ok``.
What remains of the old name reading is a hint of what to expect, never a verdict.

The EAGLE 3.1 weights (``fc_norm.*``, ``input_norm.weight``) are judged by ``eagle31.*``, which
knows the switch they belong to; this check counts them and leaves the words to it.
"""

from __future__ import annotations

from pathlib import Path

from patcher import program
from patcher.core.manifest import Variant
from patcher.core.plan import State
from patcher.drafter.checkpoint import Checkpoint
from patcher.drafter.eagle31 import SWITCH_WEIGHTS
from patcher.drafter.key_names import strip_model
from patcher.findings import Finding, hint, ok, problem, unknown
from patcher.release import release_loader
from patcher.release.launch_command import option_values
from patcher.release.release import Release
from patcher.release.release_loader import LoadAnswer

FLOATS = frozenset({"BF16", "F16", "F32", "F64", "F8_E4M3", "F8_E5M2"})
# ModelOpt's and compressed-tensors' KV-cache scales: read only where the KV cache is fp8.
KV_SCALES = (".k_scale", ".v_scale", ".kv_scale", ".q_scale", ".prob_scale")
# speculators keeps frozen copies of the verifier's norm and head for its training loss.
VERIFIER_COPY = "verifier_"


def question(ckpt: Checkpoint, release: Release, argv: list[str] | None, target: Path | None) -> release_loader.Ask:
    """What the release's loader is asked of this checkpoint: the engine module's EAGLE-3 line for this
    target and drafter, with the options of the launch (``argv``, as written) that change how the
    drafter is built or loaded (``DrafterReading.loader_options``): every spelling of a launch, and
    ``drafter check`` on the same drafter and target, ask the same question."""
    header = {name: (info.dtype, tuple(info.shape)) for name, info in ckpt.tensors.items()}
    reading = release.spec.drafter_rules
    line = reading.loader_argv(str(target or ckpt.folder), str(ckpt.folder))
    given = list(argv or ())
    for option in reading.loader_options:
        values = [v for v in option_values(given, release.name, option) if not v.startswith("--")]
        if values:
            line += [option, values[-1]]
        elif option in given:
            line.append(option)  # a flag without a value (--trust-remote-code)
    return release_loader.Ask(ckpt.folder, header, line, target)


def ask_loader(ckpt: Checkpoint, release: Release | None, argv: list[str] | None,
               target: Path | None) -> LoadAnswer:
    """The release's loader on this checkpoint, or why it cannot be asked."""
    if release is None or release.version is None:
        return release_loader.unavailable("no engine release is installed where the check runs")
    if release.site is None:
        return release_loader.unavailable(f"{release.label()} is named by its version only; its loader runs "
                                          "only where it is installed")
    return release_loader.ask(release.name, release.python, release.site, question(ckpt, release, argv, target))


def check_load(answer: LoadAnswer, ckpt: Checkpoint, release: Release | None) -> list[Finding]:
    if answer.status == "unavailable":
        return [_not_asked(answer, release)]
    assert release is not None
    who = f"{release.label()}'s loader"
    later = _pending_loader_families(answer, release)
    if answer.status == "refused":
        stage = "before any weight is read" if answer.stage == "build" else "at load"
        at = f" ({answer.where})" if answer.where else ""
        return [problem("keys.load", f"{release.label()} refuses this drafter {stage}: the server stops there{at}",
                        wanted="a checkpoint the loader takes", found=answer.error,
                        hint=later or _fix_hint(answer, release))]
    out: list[Finding] = []
    unfilled = {n: p for n, p in answer.params.items() if not p.filled}
    if unfilled:
        parts = [f"{n} ({p.covered:.0%} filled)" if p.covered else n for n, p in sorted(unfilled.items())]
        out.append(problem("keys.unloaded", f"{who} leaves {len(unfilled)} parameter(s) of {_short(answer.model)} "
                           "unfilled by any checkpoint key, without a message: they keep their random initial "
                           "values and the drafter runs untrained there",
                           wanted="every parameter filled from the checkpoint", found=", ".join(parts[:6])
                           + (" ..." if len(parts) > 6 else ""), hint=later or _fix_hint(answer, release)))
    used = answer.used()
    dropped, scales, copies, eagle31 = [], [], [], []
    for name, info in sorted(ckpt.tensors.items()):
        if name in used or name in answer.computed or info.dtype not in FLOATS:
            continue
        bare = strip_model(name)
        if bare.endswith(KV_SCALES):
            scales.append(name)
        elif bare.startswith(VERIFIER_COPY):
            copies.append(name)
        elif bare.startswith(tuple(SWITCH_WEIGHTS.values())):
            eagle31.append(name)
        else:
            dropped.append(name)
    if dropped:
        out.append(problem("keys.dropped", f"{who} reads {len(dropped)} tensor(s) into nothing, without a message: "
                           "the drafter was trained with them and runs without them",
                           wanted="every trained tensor loaded into a parameter",
                           found=", ".join(dropped[:5]) + (" ..." if len(dropped) > 5 else ""),
                           hint=later or "a key the release spells otherwise, or a module it does not build: "
                           + _fix_hint(answer, release)))
    if scales:
        out.append(hint("keys.kv_scale", f"{who} loads none of the {len(scales)} KV-cache scale(s): the drafter's "
                        "attention runs at scale 1.0, which matters only with an fp8 KV cache",
                        found=", ".join(scales[:4])))
    if not unfilled and not dropped:
        out.append(ok("keys.load", f"{who} fills every parameter of {_short(answer.model)} from the checkpoint"
                      + _said(answer, copies, eagle31) + (f"; {later}" if later else "")))
    return out


def _said(answer: LoadAnswer, copies: list[str], eagle31: list[str]) -> str:
    """What else the answer says, in one clause each."""
    parts = [f"{sum(1 for p in answer.params.values() if not p.target)} parameters from "
             f"{len(answer.used())} tensors"]
    target = sorted(n for n, p in answer.params.items() if p.target)
    if target:
        parts.append(f"{', '.join(target)} from the target, as the engine shares them")
    if answer.kept:
        parts.append(", ".join(f"{'/'.join(keys)} kept as {attr}" for attr, keys in sorted(answer.kept.items())))
    if answer.computed:
        parts.append(f"{', '.join(sorted(answer.computed))} computed by the release itself "
                     f"({', '.join(sorted(set(answer.computed.values())))})")
    if copies:
        parts.append(f"{len(copies)} verifier copy(ies) unused at inference")
    if eagle31:
        parts.append(f"{len(eagle31)} EAGLE 3.1 weight(s) left to eagle31.*")
    return " (" + "; ".join(parts) + ")"


def _short(model: str) -> str:
    return model.rsplit(".", 1)[-1] or "the drafter"


def _not_asked(answer: LoadAnswer, release: Release | None) -> Finding:
    where = "--python or --site of the environment that runs the engine"
    if release is None:  # no engine at all: every engine-specific line is a hint (docs/reference.md)
        return hint("keys.load", "no engine release: what its loader does with this checkpoint was not asked",
                    hint=f"pass {where}")
    return unknown("keys.load", "what the release's loader does with this checkpoint was not asked: "
                   f"{answer.error}; so whether every parameter loads as trained is not known",
                   wanted="the engine's own loader run on the checkpoint", found=answer.error[:200],
                   hint=f"run the check where the engine imports (pass {where})")


def _module_file(model: str) -> str:
    return model.rsplit(".", 1)[0].replace(".", "/") + ".py" if "." in model else ""


def _pending_loader_families(answer: LoadAnswer, release: Release) -> str:
    """'patcher apply' changes this loader: a pending or lost family patches the file of the class
    it built (its answer is the release as installed)."""
    where = _module_file(answer.model)
    if not where:
        return ""
    names = []
    for fam in release.families:
        if fam.state not in (State.PENDING, State.LOST) or release.version is None:
            continue
        entry = fam.family.classify(release.version)
        if isinstance(entry, Variant) and any(fp.path == where for fp in fam.family.patches[entry.id]):
            names.append(fam.family.id)
    if not names:
        return ""
    return (f"'{release.apply_command()}' changes this loader ({', '.join(names)} patches {where}): "
            "check again after applying")


def _fix_hint(answer: LoadAnswer, release: Release) -> str:
    where = release.located_by or f" --engine-version {release.version}"
    fix = program.command(f"drafter fix DRAFTER --out NEW --engine {release.name}{where}")
    return f"{fix} writes the spelling it reads"
