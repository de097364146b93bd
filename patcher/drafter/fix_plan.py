"""``drafter fix``, the plan: which tensors to rename and which config.json to write so that
the chosen engine release reads the drafter as trained. Pure: reads headers, writes nothing
(``fix_copy.write_fix`` does the writing).

What the copy gets, and why:
- key names every release of that engine reads without our patches where one exists
  (``midlayer.*`` for a one-layer drafter on SGLang <= 0.5.11), so the copy does not depend on
  our eagle3-drafter-keys family staying applied; when only our family makes the keys readable
  (a multi-layer drafter there), a note names the family the copy needs;
- a config.json the release reads (speculators -> LlamaForCausalLMEagle3 for SGLang), keeping
  the EAGLE 3.1 switches;
- aux layer ids at the top level (vLLM's runners) and in eagle_config (SGLang), in the numbering
  that makes the release capture the trained layers;
- RoPE as the release's own transformers reads it (rope_theta + rope_scaling for transformers 4).
When nothing needs changing the plan says so and nothing is written.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from patcher.drafter import eagle31, facts, rope
from patcher.drafter.checkpoint import Checkpoint
from patcher.drafter.configs import SPECULATORS, DrafterConfig, TargetConfig, parse_drafter_config
from patcher.drafter.key_names import LAYERS0, MIDLAYER, decoder_key, rename, scheme_of
from patcher.errors import DrafterInputError, FixFailed
from patcher.release.release import Release

IDS_KEY = "eagle_aux_hidden_state_layer_ids"


@dataclass(frozen=True)
class FixPlan:
    rename_from: str | None  # decoder prefix scheme to rename, or None
    rename_to: str | None
    renamed: int  # number of tensors renamed
    config: dict  # config.json to write
    config_rewritten: bool
    notes: tuple[str, ...]
    needed: bool = True  # False: the release reads the drafter as it is; nothing to write


def native_accepts(release: Release) -> frozenset[str]:
    """Key schemes the release reads without our eagle3-drafter-keys family."""
    accepted = facts.loader_accepts(release) or frozenset({MIDLAYER, LAYERS0})
    return frozenset(s for s in accepted if not facts.accepts_via_our_patch(release, s))


def plan_fix(ckpt: Checkpoint, drafter: DrafterConfig, release: Release,
             target: TargetConfig | None) -> FixPlan:
    if release.version is None:
        raise DrafterInputError("fix needs the engine release to know which key names it reads",
                                wanted="--engine-version V, or the engine installed here",
                                found=f"--engine {release.name} without a version")
    notes: list[str] = []
    schemes = {scheme_of(dk.prefix) for n in ckpt.tensors if (dk := decoder_key(n)) is not None}
    layers = {dk.layer for n in ckpt.tensors if (dk := decoder_key(n)) is not None}
    if len(schemes) > 1:
        raise FixFailed("decoder-layer tensors use both midlayer.* and layers.0.*; cannot tell which to keep",
                        wanted="one spelling", found="both", hint="remove the stale set and run fix again")
    accepted = facts.loader_accepts(release) or frozenset({MIDLAYER, LAYERS0})
    native = native_accepts(release)
    src = dst = None
    renamed = 0
    if schemes and (current := next(iter(schemes))) not in native:
        if MIDLAYER in native and layers == {0}:
            src, dst = current, MIDLAYER  # the spelling every release of this engine reads
        elif current in accepted:
            fam = release.family(facts.KEYS_FAMILY)
            notes.append(f"keys kept as {current}*: {release.label()} reads them only while "
                         f"{fam.family.id if fam else facts.KEYS_FAMILY} stays applied")
        elif MIDLAYER in accepted and layers != {0}:
            raise FixFailed(f"{release.label()} has a single midlayer; this drafter has decoder layers "
                            f"{sorted(layers)}", wanted="a one-layer drafter, or SGLang >= 0.5.12",
                            found=f"{len(layers)} decoder layers")
        else:
            src, dst = current, (LAYERS0 if LAYERS0 in accepted else MIDLAYER)
        if src is not None and dst is not None:
            renamed = sum(1 for n in ckpt.tensors if rename(n, src, dst) != n)
            notes.append(f"renamed {renamed} tensors {src}* -> {dst}* (the spelling {release.label()} reads "
                         "without our patches)")
    config, config_notes = plan_config(ckpt.config, drafter, release, target)
    notes += config_notes
    rewritten = config != ckpt.config
    needed = src is not None or rewritten
    if not needed:
        notes.append(f"nothing to fix: {release.label()} reads this drafter's keys and config as they are; "
                     "nothing was written")
    return FixPlan(rename_from=src, rename_to=dst, renamed=renamed, config=config,
                   config_rewritten=rewritten, notes=tuple(notes), needed=needed)


def plan_config(config: dict, drafter: DrafterConfig, release: Release,
                target: TargetConfig | None) -> tuple[dict, list[str]]:
    """The config.json the release reads as trained, and what was changed."""
    notes: list[str] = []
    new = copy.deepcopy(config)
    if drafter.format == SPECULATORS and not facts.reads_speculators_config(release):
        new = speculators_to_eagle3_llama(config)
        kept = [s for s in drafter.switches]
        notes.append("config.json rewritten from speculators format to LlamaForCausalLMEagle3"
                     + (f" (EAGLE 3.1 switches kept: {', '.join(kept)})" if kept else ""))
    if "speculators_model_type" in new:
        return new, notes  # a speculators config the release reads: ids and RoPE as written
    trained = rope.trained_rope(drafter.rope_theta, drafter.rope_scaling, drafter.rope_parameters)
    read = rope.rope_as_read(release, new.get("rope_theta"), new.get("rope_scaling"), new.get("rope_parameters"))
    if read is not None and read != trained:
        new.update(rope.legacy_rope_fields(trained))
        notes.append(f"rope_theta and rope_scaling written from rope_parameters: {release.label()} reads "
                     f"config.json with transformers 4, which knows only those ({trained})")
    if drafter.use_aux_hidden_state:
        notes += _plan_ids(new, drafter, release, target)
    return new, notes


def _captures(release: Release, config: dict, target: TargetConfig | None) -> list[facts.Capture | None]:
    top = config.get(IDS_KEY)
    in_eagle = (config.get("eagle_config") or {}).get(IDS_KEY)
    n = target.num_hidden_layers if target is not None else None
    arch = target.architectures[0] if target is not None and target.architectures else None
    return [facts.capture(release, r, top, in_eagle, arch, n) for r in facts.runners(release)]


def _all_capture(caps: list[facts.Capture | None], want: list[int] | None) -> bool:
    return want is None or all(c is None or (not c.nothing and c.eager == want and c.graph in (want, []))
                               for c in caps)


def _with_ids(config: dict, ids: list[int] | None) -> dict:
    new = copy.deepcopy(config)
    eagle = dict(new.get("eagle_config") or {"use_aux_hidden_state": True})
    if ids is None:
        new.pop(IDS_KEY, None)
        eagle.pop(IDS_KEY, None)
    else:
        new[IDS_KEY] = list(ids)
        eagle[IDS_KEY] = list(ids)
    new["eagle_config"] = eagle
    return new


def _plan_ids(new: dict, drafter: DrafterConfig, release: Release, target: TargetConfig | None) -> list[str]:
    """Rewrite ``new``'s aux ids (in place) so every engine path of the release captures the
    trained layers: both keys, in the numbering the release reads."""
    declared = list(drafter.aux_layer_ids) if drafter.aux_layer_ids else None
    trained, _ = facts.trained_layers(drafter.format == SPECULATORS, declared)
    n = target.num_hidden_layers if target is not None else None
    want = trained if trained is not None else (facts.default_aux_layer_ids(n) if n is not None else None)
    reparsed = parse_drafter_config(new, Path("config.json (planned)"))
    if drafter.format != SPECULATORS and _all_capture(_captures(release, new, target), want) \
            and reparsed.top_aux_ids in (None, reparsed.eagle_aux_ids):
        return []
    if trained is None:
        return []
    candidate = _with_ids(new, trained)
    caps = _captures(release, candidate, target)
    if _all_capture(caps, want):
        chosen, note = candidate, f"aux layer ids {trained} written at the top level and in eagle_config"
        if declared != trained:
            note += f" (the drafter's {declared} in the numbering {release.name} reads)"
    elif n is not None and trained == facts.default_aux_layer_ids(n):
        # The release moves explicit ids (a +1 shift, or a reset when CUDA graphs are built); its
        # default is the same layers taken as given, so leaving them out captures what was trained on.
        chosen = _with_ids(new, None)
        got = _describe(caps)
        note = (f"aux layer ids {trained} left out: they are {release.label()}'s default, and written out it "
                f"would capture {got}")
    else:
        chosen = candidate
        note = (f"aux layer ids {trained} written, but {release.label()} captures other layers for them "
                "(see the problems below)")
    new.clear()
    new.update(chosen)
    return [note]


def _describe(caps: list[facts.Capture | None]) -> str:
    cap = next((c for c in caps if c is not None), None)
    if cap is None:
        return "an unknown set"
    if cap.nothing:
        return "nothing"
    return str(cap.eager) if cap.graph in (cap.eager, []) else f"{cap.eager} (eager), {cap.graph} (graphs)"


SWITCHES_AND_FIELDS = ("draft_vocab_size", "target_hidden_size", "norm_before_residual", "torch_dtype",
                       *eagle31.EAGLE31_SWITCHES)


def speculators_to_eagle3_llama(config: dict) -> dict:
    """The LlamaForCausalLMEagle3 config both engines read, from a speculators config (ids are
    written by the caller, in the numbering the release reads)."""
    layer = config.get("transformer_layer_config") or {}
    new = {k: v for k, v in layer.items() if k not in ("architectures", "auto_map")}
    new["architectures"] = ["LlamaForCausalLMEagle3"]
    new.setdefault("model_type", "llama")
    for key in SWITCHES_AND_FIELDS:
        if config.get(key) is not None:
            new[key] = config[key]
    new["eagle_config"] = {"use_aux_hidden_state": True}
    return new
