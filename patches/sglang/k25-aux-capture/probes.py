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


# Ids whose capture tells the two conventions apart and is never the default.
ID_LISTS = ([5, 20, 40], [1, 20, 40], [2, 30, 58])


def _plus_one_always(ids):
    """0.5.4.post2-0.5.12.post1 as published."""
    return [i + 1 for i in ids]


def _rule_0513(ids):
    """0.5.13+, and earlier releases once eagle3-aux-layer-ids is applied (sgl-project/sglang#25454)."""
    return [i + 1 for i in ids] if ids and ids[0] == 1 else list(ids)


def _release():
    from importlib.metadata import version

    from packaging.version import Version

    return Version(version("sglang"))


def _check_ids_reach_decoder(lm_cls, set_ids):
    """The ids a user asks for land in the decoder's layers_to_capture by this release's rule.

    On 0.5.13+ that is 0.5.13's rule, exactly. Below 0.5.13 the published rule is "+1 always";
    the eagle3-aux-layer-ids family (which has its own probes for the rule) replaces it with
    0.5.13's, so either may be installed, but one rule must hold for every list: a list
    matching one convention and another list the other is a failure.
    """
    from packaging.version import Version

    rules = [_rule_0513] if _release() >= Version("0.5.13") else [_rule_0513, _plus_one_always]
    results = []
    for ids in ID_LISTS:
        lm = _deepseek_lm(lm_cls)
        set_ids(lm, list(ids))
        assert lm.capture_aux_hidden_states is True, "aux capture not switched on"
        results.append((ids, list(lm.model.layers_to_capture)))
    held = [r for r in rules if all(got == r(ids) for ids, got in results)]
    assert held, (
        f"captured {results}; expected one rule for all of them: "
        + " or ".join(f"{r.__name__} -> {[r(ids) for ids, _ in results]}" for r in rules)
    )


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

    # End to end through the real DeepseekV3ForCausalLM hook (what K2.5 wraps): the wrapper
    # forwards the ids unchanged, so it captures exactly what the bare target captures.
    from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM

    def via_wrapper(lm, ids):
        _bare(cls, language_model=lm).set_eagle3_layers_to_capture(ids)

    _check_ids_reach_decoder(DeepseekV3ForCausalLM, via_wrapper)
    for ids in ID_LISTS:
        direct, wrapped = _deepseek_lm(DeepseekV3ForCausalLM), _deepseek_lm(DeepseekV3ForCausalLM)
        direct.set_eagle3_layers_to_capture(list(ids))
        via_wrapper(wrapped, list(ids))
        assert wrapped.model.layers_to_capture == direct.model.layers_to_capture, (
            f"ids {ids}: through the K2.5 wrapper {wrapped.model.layers_to_capture}, "
            f"on the bare target {direct.model.layers_to_capture}"
        )


def k2_capture_reaches_decoder(module):
    """Kimi-K2 (DeepseekV3ForCausalLM) target: the hook exists and honours the ids.

    A regression guard, not a proof of v1: v1 changes kimi_k25.py only, so on 0.5.9 this
    passes on the published files too. It is the meaningful probe on 0.5.4.post2-0.5.8.post1
    (no kimi_k25.py) and guards what the K2.5 delegation relies on everywhere else."""
    cls = module.DeepseekV3ForCausalLM
    assert hasattr(cls, "set_eagle3_layers_to_capture"), "DeepSeek target cannot capture aux states"
    _check_ids_reach_decoder(cls, lambda lm, ids: lm.set_eagle3_layers_to_capture(ids))
    lm = _deepseek_lm(cls)
    lm.set_eagle3_layers_to_capture(None)
    assert lm.model.layers_to_capture == [2, 30, 58], (
        f"default capture for 61 layers is {lm.model.layers_to_capture}, expected [2, 30, 58]"
    )
