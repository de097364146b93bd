"""The tensor names of an EAGLE-3 Llama drafter and the two decoder-layer spellings.

SafeAILab's EAGLE code names the single decoder layer ``midlayer.*``; `speculators`
(and vLLM's module tree) name it ``layers.0.*``. Everything else is shared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The two spellings of the decoder layer (a checkpoint's names, not an engine's: which spelling a
# release reads is facts.loader_accepts).
MIDLAYER = "midlayer."
LAYERS0 = "layers.0."
TOP_LEVEL = frozenset({"embed_tokens.weight", "fc.weight", "fc.bias", "norm.weight", "lm_head.weight", "d2t", "t2d"})
DECODER_PARTS = frozenset({
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
    "input_layernorm.weight", "post_attention_layernorm.weight", "hidden_norm.weight",
})
_LAYERS_N = re.compile(r"^layers\.(\d+)\.")
# Some exports prefix every name with "model."; SGLang retries "model.<name>", so the
# prefix is transparent there. We compare names without it.
MODEL_PREFIX = "model."


@dataclass(frozen=True)
class DecoderKey:
    prefix: str  # "midlayer." or "layers.N."
    layer: int  # 0 for midlayer
    part: str  # e.g. "self_attn.q_proj.weight"


def strip_model(name: str) -> str:
    return name.removeprefix(MODEL_PREFIX)


def decoder_key(name: str) -> DecoderKey | None:
    name = strip_model(name)
    if name.startswith(MIDLAYER):
        return DecoderKey(MIDLAYER, 0, name[len(MIDLAYER):])
    m = _LAYERS_N.match(name)
    if m:
        return DecoderKey(m.group(0), int(m.group(1)), name[m.end():])
    return None


def scheme_of(prefix: str) -> str:
    """'midlayer.' or 'layers.0.' (the scheme a prefix belongs to; layers.N counts as layers.)."""
    return MIDLAYER if prefix == MIDLAYER else LAYERS0


# EAGLE 3.1 weights (norm_before_fc: input_norm; fc_norm: one norm per aux layer): named here so
# they are not "unknown"; whether the release loads them is the switch check's business.
_EAGLE31 = re.compile(r"^(input_norm\.weight|fc_norm\.\d+\.weight)$")


def is_known(name: str) -> bool:
    dk = decoder_key(name)
    if dk is not None:
        return dk.part in DECODER_PARTS
    return strip_model(name) in TOP_LEVEL or _EAGLE31.match(strip_model(name)) is not None


def rename(name: str, src: str, dst: str) -> str:
    """Move one decoder-layer name from scheme ``src`` to ``dst`` (midlayer. <-> layers.0.),
    keeping a leading "model." if the file had one."""
    lead = MODEL_PREFIX if name.startswith(MODEL_PREFIX) else ""
    bare = name[len(lead):]
    if bare.startswith(src):
        return lead + dst + bare[len(src):]
    return name
