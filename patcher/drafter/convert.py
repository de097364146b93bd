"""``drafter fix``, the plan: which tensors to rename and which config.json to write so that
the chosen engine release reads the drafter as trained. Pure: reads headers, writes nothing
(``fix.write_fix`` does the writing).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import facts
from .checkpoint import Checkpoint
from .configs import SPECULATORS, DrafterConfig, TargetConfig
from .errors import DrafterInputError, FixFailed
from .facts import LAYERS0, MIDLAYER
from .key_names import decoder_key, rename, scheme_of
from .release import Release


@dataclass(frozen=True)
class FixPlan:
    rename_from: str | None  # decoder prefix scheme to rename, or None
    rename_to: str | None
    renamed: int  # number of tensors renamed
    config: dict  # config.json to write
    config_rewritten: bool
    notes: tuple[str, ...]


def plan_fix(ckpt: Checkpoint, drafter: DrafterConfig, engine: Release,
             target: TargetConfig | None) -> FixPlan:
    if engine.version is None:
        raise DrafterInputError("fix needs the engine release to know which key names it reads",
                                wanted="--engine-version V, or the engine installed here",
                                found=f"--engine {engine.name} without a version")
    notes: list[str] = []
    schemes = {scheme_of(dk.prefix) for n in ckpt.tensors if (dk := decoder_key(n)) is not None}
    layers = {dk.layer for n in ckpt.tensors if (dk := decoder_key(n)) is not None}
    if len(schemes) > 1:
        raise FixFailed("decoder-layer tensors use both midlayer.* and layers.0.*; cannot tell which to keep",
                        wanted="one spelling", found="both", hint="remove the stale set and run fix again")
    accepted = facts.loader_accepts(engine) or frozenset({MIDLAYER, LAYERS0})
    src = dst = None
    renamed = 0
    if schemes and (current := next(iter(schemes))) not in accepted:
        src, dst = current, (LAYERS0 if LAYERS0 in accepted else MIDLAYER)
        if dst == MIDLAYER and layers != {0}:
            raise FixFailed(f"{engine.label()} has a single midlayer; this drafter has decoder layers {sorted(layers)}",
                            wanted="a one-layer drafter, or SGLang >= 0.5.12",
                            found=f"{len(layers)} decoder layers")
        renamed = sum(1 for n in ckpt.tensors if rename(n, src, dst) != n)
        notes.append(f"renamed {renamed} tensors {src}* -> {dst}* for {engine.label()}")
    config = ckpt.config
    rewritten = False
    if drafter.format == SPECULATORS and not facts.reads_speculators_config(engine):
        config, more = speculators_to_eagle3_llama(ckpt.config, drafter, engine, target)
        notes += more
        rewritten = True
    if not notes:
        notes.append(f"already read as trained by {engine.label()}; copied unchanged")
    return FixPlan(rename_from=src, rename_to=dst, renamed=renamed, config=config,
                   config_rewritten=rewritten, notes=tuple(notes))


def speculators_to_eagle3_llama(config: dict, drafter: DrafterConfig, engine: Release,
                                target: TargetConfig | None) -> tuple[dict, list[str]]:
    """The LlamaForCausalLMEagle3 config both engines read, from a speculators config."""
    layer = config.get("transformer_layer_config") or {}
    new = {k: v for k, v in layer.items() if k not in ("architectures", "auto_map")}
    new["architectures"] = ["LlamaForCausalLMEagle3"]
    new.setdefault("model_type", "llama")
    for key in ("draft_vocab_size", "target_hidden_size", "norm_before_residual", "torch_dtype"):
        if config.get(key) is not None:
            new[key] = config[key]
    notes = ["config.json rewritten from speculators format to LlamaForCausalLMEagle3"]
    eagle_config: dict = {"use_aux_hidden_state": True}
    ids = list(drafter.aux_layer_ids) if drafter.aux_layer_ids else None
    if ids is not None:
        n = target.num_hidden_layers if target is not None else None
        cap = facts.aux_capture(engine, ids, n)
        moved = cap is None or cap.eager != ids or cap.graph not in (ids, [])
        if moved and n is not None and ids == facts.default_aux_layer_ids(n):
            # The release moves explicit ids (a +1 shift, or a reset when CUDA graphs are built);
            # its default is the same layers taken as given, so leaving them out captures
            # exactly what was trained on, in eager and graph mode alike.
            got = "an unknown set" if cap is None else (
                str(cap.eager) if cap.graph in (cap.eager, []) else f"{cap.eager} (eager), {cap.graph} (graphs)")
            notes.append(f"aux layer ids {ids} left out: they are {engine.label()}'s default, "
                         f"and written out it would capture {got}")
        else:
            eagle_config["eagle_aux_hidden_state_layer_ids"] = ids
            if moved:
                notes.append(f"aux layer ids {ids} kept, but {engine.label()} captures other layers for them "
                             "(see the problems below)")
    new["eagle_config"] = eagle_config
    return new, notes
