"""Probes for k25-aux-capture.

The wrapper and the DeepSeek-V3 language model are created with object.__new__ and given
only the attributes the EAGLE-3 hooks touch, so nothing is built, loaded or allocated.
"""

from types import SimpleNamespace

KIMI_LAYERS = 61  # Kimi-K2 / K2.5 text model: default capture is [2, 30, 58]


class _RecordingLM:
    """Stands in for the language model and records what the wrapper forwards."""

    def __init__(self):
        self.calls = []
        self.embed_head = None

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.calls.append(layer_ids)

    def get_embed_and_head(self):
        return ("EMBED", "HEAD")

    def set_embed_and_head(self, embed, head):
        self.embed_head = (embed, head)


def _bare(cls, **attrs):
    obj = object.__new__(cls)
    for k, v in attrs.items():
        object.__setattr__(obj, k, v)  # bypass nn.Module.__setattr__ (no __init__ ran)
    return obj


def _deepseek_lm(cls):
    return _bare(
        cls,
        pp_group=SimpleNamespace(is_last_rank=True),
        config=SimpleNamespace(num_hidden_layers=KIMI_LAYERS),
        model=SimpleNamespace(layers_to_capture=[]),
        capture_aux_hidden_states=False,
    )


def _check_ids_reach_decoder(lm_cls, set_ids):
    """Ids a user asks for must land in the decoder's layers_to_capture.

    SGLang's convention differs by release: 0.5.4.post2-0.5.12.post1 always add 1, 0.5.13+
    add 1 only when the first id is 1. Either way the asked ids (not the default) must
    arrive, so we use a non-default set and accept the two documented conventions.
    """
    for ids in ([5, 20, 40], [2, 30, 58]):
        lm = _deepseek_lm(lm_cls)
        set_ids(lm, list(ids))
        got = list(lm.model.layers_to_capture)
        allowed = (ids, [i + 1 for i in ids])
        assert got in allowed, f"asked to capture {ids}, decoder captures {got}"
        assert lm.capture_aux_hidden_states is True, "aux capture not switched on"


def k25_capture_reaches_language_model(module):
    cls = module.KimiK25ForConditionalGeneration
    for name in ("set_eagle3_layers_to_capture", "get_embed_and_head", "set_embed_and_head"):
        assert hasattr(cls, name), f"KimiK25ForConditionalGeneration lacks {name}"

    rec = _RecordingLM()
    wrapper = _bare(cls, language_model=rec)
    wrapper.set_eagle3_layers_to_capture([2, 30, 58])
    wrapper.set_eagle3_layers_to_capture(None)
    assert rec.calls == [[2, 30, 58], None], f"ids forwarded as {rec.calls}"
    assert wrapper.get_embed_and_head() == ("EMBED", "HEAD"), "get_embed_and_head not delegated"
    wrapper.set_embed_and_head("E", "H")
    assert rec.embed_head == ("E", "H"), "set_embed_and_head not delegated"

    # End to end through the real DeepseekV3ForCausalLM hook (what K2.5 wraps).
    from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM

    def via_wrapper(lm, ids):
        _bare(cls, language_model=lm).set_eagle3_layers_to_capture(ids)

    _check_ids_reach_decoder(DeepseekV3ForCausalLM, via_wrapper)


def k2_capture_reaches_decoder(module):
    """Kimi-K2 (DeepseekV3ForCausalLM) target: the hook exists and honours the ids."""
    cls = module.DeepseekV3ForCausalLM
    assert hasattr(cls, "set_eagle3_layers_to_capture"), "DeepSeek target cannot capture aux states"
    _check_ids_reach_decoder(cls, lambda lm, ids: lm.set_eagle3_layers_to_capture(ids))
    lm = _deepseek_lm(cls)
    lm.set_eagle3_layers_to_capture(None)
    assert lm.model.layers_to_capture == [2, 30, 58], (
        f"default capture for 61 layers is {lm.model.layers_to_capture}, expected [2, 30, 58]"
    )
