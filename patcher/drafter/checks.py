"""``drafter check``: compare a drafter's config and tensor headers with the target and
with what the chosen engine release will do with them.

Each check returns findings; none raises for a wrong-but-readable drafter. The checks
target the failures that cost a full server load and produce no error: keys skipped by
the loader, an ``fc`` that gets other features than it was trained on, a vocabulary map
that is missing, a launch flag that runs EAGLE-3 as EAGLE-1.

Over 300 lines: the whole check in one reading order: the checkpoint's own checks, then what a
launch asking for EAGLE (not EAGLE-3) makes of them on each engine, which rewrites those findings.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from patcher import engine_specs, program
from patcher.core.plan import State
from patcher.drafter import facts, shape_checks
from patcher.drafter.checkpoint import Checkpoint
from patcher.drafter.configs import SPECULATORS, DrafterConfig, TargetConfig
from patcher.drafter.flag_checks import check_flags, guess_engine, split_flags
from patcher.drafter.key_names import MODEL_PREFIX, decoder_key, is_known, scheme_of
from patcher.drafter.loader_checks import ask_loader, check_load
from patcher.drafter.release_checks import (
    MLA_DRAFTERS,
    check_aux_capture,
    check_aux_ids,
    check_drafter_class,
    check_rope,
    check_setup,
    check_switches,
    check_target_class,
    check_use_aux,
    unproven,
)
from patcher.drafter.shape_checks import check_attention, check_context, check_dtype, check_vocab, n_or_unset, shape_of
from patcher.findings import HINT, Finding, hint, ok, problem, unknown
from patcher.release.launch_command import method_given
from patcher.release.release import Release

DEFAULT_AUX_LAYERS = 3


def check_drafter(ckpt: Checkpoint, drafter: DrafterConfig, target: TargetConfig | None,
                  release: Release | None, flags: str | None, *, target_folder: Path | None = None,
                  launch_argv: list[str] | None = None, env: dict[str, str] | None = None,
                  runner: str | None = None) -> list[Finding]:
    """Every finding about the drafter on ``release``. ``target_folder`` and ``launch_argv`` (the
    server's own options, doctor's command) are what the release's loader is built from; without a
    launch line, the engine module's minimal EAGLE-3 line is used. ``env``: the launch's environment
    (doctor's): the runner it selects is the one whose capture is judged; ``runner``: that runner
    where doctor decided it for the whole launch (the release's start-up configuration's answer)."""
    if release is not None and release.spec.drafter is None:
        return [_not_checked(release), *check_aux_ids(drafter, target),
                *_own_checks(ckpt, drafter, target, loader=False)]
    # What a release does is a rule of ours (facts) except where its own code was asked (the loader
    # child: keys and capture); a rule is said as a verdict only on a release it is proven on.
    findings = check_setup(release, drafter) if release is not None else []
    findings += unproven(release, check_target_class(release, target) if release is not None else [])
    findings += unproven(release, _check_config_format(drafter, release))
    findings += check_aux_ids(drafter, target)
    answer = ask_loader(ckpt, release, launch_argv, target_folder)
    findings += check_aux_capture(drafter, target, release, env, asked=answer.capture, selected=runner)
    findings += unproven(release, check_switches(list(ckpt.tensors), drafter, release))
    findings += unproven(release, check_rope(drafter, release))
    findings += unproven(release, shape_checks.check_mlp(ckpt, drafter, release))
    findings += check_load(answer, ckpt, release)
    if answer.status == "unavailable":  # the name rules, said as what to expect, never as a verdict
        findings += [_expected(f) for f in _check_decoder_keys(ckpt, release) + _check_unknown_keys(ckpt, release)
                     if f.level != "ok"]
    findings += _own_checks(ckpt, drafter, target)
    if any(a in MLA_DRAFTERS for a in drafter.architectures):
        return findings
    if flags is not None:
        flag_engine = release.spec if release is not None else guess_engine(flags)
        if flag_engine is None:
            findings.append(hint("flags.engine", "cannot tell the engine from --flags; pass --engine",
                                 found=flags[:80]))
        else:
            findings += check_flags(flags, flag_engine, ckpt.folder, drafter.format == SPECULATORS)
        given = method_given(split_flags(flags), release.name) if release is not None else None
        launch = release.spec.launch if release is not None else None
        eagle = launch.eagle_methods[0] if launch is not None else None
        if release is not None and given is not None and given[1] == eagle:  # EAGLE, not EAGLE3 (issue 32)
            findings = facts.reading(release).eagle_with_eagle3_drafter(findings, release, drafter)
    return findings


def _own_checks(ckpt: Checkpoint, drafter: DrafterConfig, target: TargetConfig | None,
                loader: bool = True) -> list[Finding]:
    """The checkpoint against its own config and the target: what no engine's reading changes.
    ``loader``: the engine's loader was asked about the keys (said above these lines)."""
    if any(a in MLA_DRAFTERS for a in drafter.architectures):
        keys = " (its keys are the loader's, above)" if loader else ""
        return [hint("architecture.mla", "an MLA EAGLE-3 drafter: the shape checks here are for Llama drafters "
                     f"and were skipped{keys}")]
    findings = _check_fc(ckpt, drafter, target) + check_vocab(ckpt, drafter, target)
    findings += check_attention(ckpt, drafter, target) + check_context(drafter, target) + check_dtype(ckpt, drafter)
    if target is None:
        findings.append(hint("target.missing", "no --target: checked against the drafter's own config only",
                             hint="pass --target KIMI_FOLDER to check aux layer ids, hidden size and vocab"))
    return findings


def _not_checked(release: Release) -> Finding:
    """An engine whose module states no drafter reading: what it does with the drafter is unknown."""
    return unknown("engine.drafter", f"{release.label()}: how it loads and feeds this drafter is not checked for "
                   "this engine (its module states no EAGLE-3 drafter reading): its keys, aux capture, config "
                   "format and launch flags are not judged", hint="the other lines are the checkpoint's own checks")


def _fix_command(release: Release | None) -> str:
    name = release.name if release else "{" + ",".join(engine_specs.NAMES) + "}"
    if release is not None and release.located_by:
        where = release.located_by
    else:
        where = f" --engine-version {release.version}" if release and release.version else ""
    return program.command(f"drafter fix DRAFTER --out NEW --engine {name}{where}")


def _check_config_format(d: DrafterConfig, release: Release | None) -> list[Finding]:
    readers = ", ".join(f"{s.title} reads it from {d.since[facts.SPECULATORS_CONFIG]}"
                        if facts.SPECULATORS_CONFIG in d.since else f"{s.title} never"
                        for s, d in engine_specs.DRAFTER_READERS)
    if d.format == SPECULATORS:
        if d.speculators_model_type != "eagle3":
            return [problem("config.format", "a speculators config of another algorithm than EAGLE-3",
                            wanted='"speculators_model_type": "eagle3"',
                            found=repr(d.speculators_model_type) if d.speculators_model_type else "(not set)")]
        if release is None:
            return [hint("config.format", f"speculators-format config: {readers}",
                         hint="pass --engine to check it against your engine")]
        if facts.reads_speculators_config(release):
            return [ok("config.format", f"speculators-format config, read by {release.label()}")]
        title = release.spec.title
        reads_from = release.spec.drafter_rules.since.get(facts.SPECULATORS_CONFIG)  # None: no release of it does
        if reads_from is not None and release.version is None:
            return [hint("config.format", f"speculators-format config: {title} reads it from {reads_from}",
                         hint="pass --engine-version to check your release")]
        why = f"{title} has no reader for it" if reads_from is None else f"{title} reads it only from {reads_from}"
        return [problem("config.format", f"speculators-format config that {release.label()} cannot read ({why})",
                        wanted='a LlamaForCausalLMEagle3 config ("architectures", Llama fields, "eagle_config")',
                        found='"speculators_model_type": "eagle3"',
                        hint=f"convert it: {_fix_command(release)}")]
    archs = ", ".join(d.architectures) or "(none)"
    if not d.architectures or not any("Eagle3" in a for a in d.architectures):
        eagle1 = any("Eagle" in a for a in d.architectures)
        what = "an EAGLE-1 drafter, not EAGLE-3" if eagle1 else "not an EAGLE-3 drafter config"
        return [problem("config.format", f"architectures {archs}: {what}",
                        wanted='"architectures": ["LlamaForCausalLMEagle3"]', found=archs)]
    return check_drafter_class(d, release)


def _expected(f: Finding) -> Finding:
    """A name rule's finding where the loader could not be asked: a hint of what to expect."""
    return replace(f, level=HINT, message=f"expected from the key names, not asked of the loader: {f.message}")


def _check_decoder_keys(ckpt: Checkpoint, release: Release | None) -> list[Finding]:
    by_scheme: dict[str, list[str]] = {}
    layers: set[int] = set()
    for name in ckpt.tensors:
        dk = decoder_key(name)
        if dk is not None:
            by_scheme.setdefault(scheme_of(dk.prefix), []).append(name)
            layers.add(dk.layer)
    if not by_scheme:
        return [problem("keys.decoder_prefix", "no decoder-layer tensors (neither midlayer.* nor layers.0.*)",
                        wanted="midlayer.* or layers.0.* tensors", found=f"{len(ckpt.tensors)} tensors, none of them")]
    if len(by_scheme) > 1:
        counts = ", ".join(f"{len(v)} {k}*" for k, v in sorted(by_scheme.items()))
        return [problem("keys.decoder_prefix", "decoder-layer tensors under both spellings; one set would be ignored",
                        wanted="one spelling", found=counts)]
    ((scheme, names),) = by_scheme.items()
    found = f"{len(names)} {scheme}* tensors"
    out: list[Finding] = []
    accepted = facts.loader_accepts(release) if release is not None else None
    if release is None or accepted is None:
        # each engine in its own words: every engine where none is named, else the release's alone
        readers = [d for _, d in engine_specs.DRAFTER_READERS] if release is None else [release.spec.drafter_rules]
        said = "; ".join(d.decoder_spellings for d in readers if d.decoder_spellings)
        who = release.label() if release is not None else "the engine"
        out.append(hint("keys.decoder_prefix", f"{found}: {said or f'which spellings {who} reads is not stated'}",
                        hint="pass --engine and --engine-version (or --python / --site) to check your release"))
    elif scheme in accepted:
        via = (f" (with our patch {release.name}/{facts.KEYS_FAMILY})"
               if facts.accepts_via_our_patch(release, scheme) else "")
        out.append(ok("keys.decoder_prefix", f"{found}, read by {release.label()}{via}"))
    else:
        wanted = " or ".join(f"{p}*" for p in sorted(accepted))
        fam = release.family(facts.KEYS_FAMILY)
        patch = (f"  (or apply {fam.family.id}: {release.apply_command()})"
                 if fam is not None and fam.state in (State.PENDING, State.LOST) else "")
        out.append(problem(
            "keys.decoder_prefix",
            f"{release.label()} skips all {found} without a message: the decoder layer stays "
            "randomly initialised and nothing is accepted",
            wanted=f"{wanted} tensors", found=found, hint=f"convert: {_fix_command(release)}{patch}"))
    limit = facts.max_decoder_layers(release) if release is not None else None
    if release is not None and limit is not None and len(layers) > limit:
        out.append(problem("keys.decoder_layers", f"{len(layers)} decoder layers; {release.label()} builds {limit}",
                           wanted=f"{limit} decoder layer", found=f"layers {sorted(layers)}",
                           hint=" or ".join(f"{s.title} >= {d.since[d.multi_layer_since]}"
                                            for s, d in engine_specs.DRAFTER_READERS if d.multi_layer_since in d.since)
                           + " build multi-layer drafters"))
    if release is not None and facts.reading(release).adds_model_prefix:
        prefixed = [n for n in ckpt.tensors if n.startswith(MODEL_PREFIX)]
        if prefixed:
            out.append(problem("keys.model_prefix", f"tensor names start with 'model.': "
                               f"{release.spec.title} adds 'model.' again "
                               "and will not find them", wanted="names without 'model.'",
                               found=f"{len(prefixed)} tensors, e.g. {prefixed[0]}"))
    return out


def _check_unknown_keys(ckpt: Checkpoint, release: Release | None) -> list[Finding]:
    unknown = sorted(n for n in ckpt.tensors if not is_known(n))
    if not unknown:
        return [ok("keys.unknown", f"all {len(ckpt.tensors)} tensor names are EAGLE-3 Llama drafter names")]
    shown = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
    if release is not None and not facts.reading(release).loader_strict:  # the loader skips them
        what = (f"{release.label()} raises at load on {len(unknown)} tensor(s) it has no parameter for "
                f"(our {facts.KEYS_FAMILY} makes that loud)" if facts.unknown_keys_fail_loudly(release) else
                f"{release.label()} skips {len(unknown)} tensor(s) it has no parameter for, without a message")
        return [problem("keys.unknown", what, wanted="only EAGLE-3 Llama drafter tensor names", found=shown)]
    return [hint("keys.unknown", f"{len(unknown)} tensor(s) are not EAGLE-3 Llama drafter names "
                 "(SGLang skips such tensors without a message)", found=shown)]


def _target_hidden(d: DrafterConfig, t: TargetConfig | None) -> int | None:
    if t is not None and t.hidden_size is not None:
        return t.hidden_size
    return d.target_hidden_size or d.hidden_size


def _check_fc(ckpt: Checkpoint, d: DrafterConfig, t: TargetConfig | None) -> list[Finding]:
    out: list[Finding] = []
    th = _target_hidden(d, t)
    if t is not None and t.hidden_size is not None and d.hidden_size is not None:
        declared = d.target_hidden_size or d.hidden_size
        field = "target_hidden_size" if d.target_hidden_size else "hidden_size"
        if declared != t.hidden_size:
            out.append(problem("config.target_hidden_size",
                               f"the drafter's {field} {declared} is not the target's hidden size {t.hidden_size}: "
                               "the engine sizes fc's input from it",
                               wanted=f"{field} {t.hidden_size}" if field == "target_hidden_size"
                               else f'"target_hidden_size": {t.hidden_size}',
                               found=f"{field} {declared}"))
    if not d.use_aux_hidden_state:
        # One layer in, fc skipped: fine for a drafter trained that way, silent garbage otherwise.
        fc = shape_of(ckpt, "fc.weight")
        return out + check_use_aux(fc[1] if fc is not None and len(fc) == 2 else None, d, th)
    shape = shape_of(ckpt, "fc.weight")
    k = len(d.aux_layer_ids) if d.aux_layer_ids else DEFAULT_AUX_LAYERS
    if shape is None:
        out.append(problem("fc.shape", "no fc.weight: an EAGLE-3 drafter fuses the aux layers through fc",
                           wanted=f"fc.weight [{n_or_unset(d.hidden_size)}, {k} x {n_or_unset(th)}]", found="absent"))
        return out
    if len(shape) != 2 or th is None:
        out.append(problem("fc.shape", "fc.weight is not a matrix" if len(shape) != 2 else
                           "cannot size fc: no hidden size in the drafter config and no --target",
                           wanted=f"[hidden, {k} x target_hidden]", found=str(list(shape))))
        return out
    rows, cols = shape
    want = f"[{d.hidden_size or rows}, {k * th}] ({k} aux layers x {th})"
    if d.hidden_size is not None and rows != d.hidden_size:
        out.append(problem("fc.shape", f"fc.weight has {rows} outputs, the drafter's hidden size is {d.hidden_size}",
                           wanted=want, found=str(list(shape))))
    elif cols == k * th:
        ids = f" (layers {', '.join(map(str, d.aux_layer_ids))})" if d.aux_layer_ids else ""
        out.append(ok("fc.shape", f"fc.weight {list(shape)} fuses {k} aux layers x {th}{ids}"))
    elif cols % th == 0:
        m = cols // th
        what = (f"fc.weight was trained on {m} layer{'s' if m > 1 else ''} of {th} features; "
                f"EAGLE-3 feeds it {k} x {th} = {k * th}")
        if m == 1:
            what += " (an EAGLE-1 style fc)"
        out.append(problem("fc.shape", what, wanted=want, found=f"{list(shape)} ({m} x {th})",
                           hint="the config's eagle_aux_hidden_state_layer_ids must list as many layers as fc "
                                "was trained on"))
    else:
        out.append(problem("fc.shape", f"fc.weight input {cols} is not a multiple of the target hidden size {th}",
                           wanted=want, found=str(list(shape))))
    return out

