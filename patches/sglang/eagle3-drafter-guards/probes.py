"""Probes for eagle3-drafter-guards.

Call the installed drafter's `load_weights` (LlamaForCausalLMEagle3 in llama_eagle3.py,
Eagle3DeepseekV2ForCausalLM in kimi_k25_eagle3.py) unbound, with a stand-in `self` that has no
parameters: every checkpoint key is skipped as the published loop skips unknown keys, except `d2t`,
which the loop itself turns into `hot_token_id`. The stand-in says the eagle3-drafter-keys check
already ran (`_kimi_checked`), so that family, applied in the same environment, stays out of these
probes. Weights come as a generator, as the model loader hands them over at start-up.
"""

from types import SimpleNamespace

VOCAB = 100
LLAMA = "LlamaForCausalLMEagle3"
MLA = "Eagle3DeepseekV2ForCausalLM"


class _Consumed(Exception):
    """A weight was taken from the generator: the load went past the switch check."""


def _self(**config):
    cfg = dict(vocab_size=VOCAB, draft_vocab_size=None, hidden_size=8, tie_word_embeddings=False)
    cfg.update(config)
    return SimpleNamespace(
        config=SimpleNamespace(**cfg),
        hot_token_id=None,
        named_parameters=lambda: iter(()),
        post_load_weights=lambda: None,  # the MLA loader's last step
        _kimi_checked=True,  # eagle3-drafter-keys: its check counts as done
    )


def _keys(*names):
    import torch

    for name in names:
        yield name, (torch.zeros(10, dtype=torch.long) if name == "d2t" else torch.zeros(2, 2))


def _load(module, cls, weights, **config):
    """What the startup load does: 'loaded', or the ValueError it raised."""
    me = _self(**config)
    try:
        getattr(module, cls).load_weights(me, weights)
    except ValueError as e:
        return e
    return "loaded", me


def _reduced_vocab_without_d2t_refused(module, cls):
    import torch

    r = _load(module, cls, _keys("fc.weight", "norm.weight"), draft_vocab_size=10)
    assert isinstance(r, ValueError), f"{cls}: a reduced vocabulary without d2t loaded in silence"
    for part in ("d2t", "draft_vocab_size=10", f"vocab_size={VOCAB}"):
        assert part in str(r), f"{cls}: the error does not name {part!r}: {r}"
    # What must keep loading: a d2t anywhere in the checkpoint (here last), a full vocabulary,
    # a tied head, and online weight updates (lists), which keep the published behaviour.
    r = _load(module, cls, _keys("fc.weight", "d2t"), draft_vocab_size=10)
    assert r[0] == "loaded", f"{cls}: a reduced vocabulary with its d2t was refused: {r}"
    assert torch.equal(r[1].hot_token_id, torch.arange(10)), f"{cls}: d2t no longer reaches hot_token_id"
    for what, cfg in (("full vocabulary, no draft_vocab_size", {}),
                      ("draft_vocab_size == vocab_size", {"draft_vocab_size": VOCAB})):
        r = _load(module, cls, _keys("fc.weight"), **cfg)
        assert r[0] == "loaded", f"{cls}: {what} without d2t was refused: {r}"
    r = _load(module, cls, list(_keys("fc.weight")), draft_vocab_size=10)
    assert r[0] == "loaded", f"{cls}: an online weight update (a list) was checked like the startup load: {r}"


def _first_key_raises():
    raise _Consumed()
    yield  # a generator


def _switch_outcome(module, cls, **config):
    try:
        r = _load(module, cls, _first_key_raises(), **config)
    except _Consumed:
        return "not refused"
    return r


def _switches(module, cls, unread: dict, read: tuple):
    """``unread``: config entries (as kwargs) -> the text the error must name; ``read``: entries
    that must load as published (the release reads them, or runs them as their trainer meant)."""
    for what, (config, names) in unread.items():
        r = _switch_outcome(module, cls, **config)
        assert isinstance(r, ValueError), f"{cls}: {what} is not read by this release and was not refused ({r})"
        for part in names:
            assert part in str(r), f"{cls}: the refusal of {what} does not name {part!r}: {r}"
    for config in read:
        r = _switch_outcome(module, cls, **config)
        assert r == "not refused", f"{cls}: {config} is read by this release but was refused: {r}"
    assert _switch_outcome(module, cls) == "not refused", f"{cls}: a config without switches was refused"
    off = {"fc_norm": False, "norm_output": False, "norm_before_fc": False}
    assert _switch_outcome(module, cls, **off) == "not refused", f"{cls}: switches set to false were refused"


NBF_CONFIG = ({"norm_before_fc": True}, ("norm_before_fc",))
NBF_EAGLE = ({"eagle_config": {"norm_before_fc": True}}, ("norm_before_fc",))
FC_NORM_ON = {"fc_norm": True}
AUX_NORM_ON = {"use_aux_norm": True}
NORM_OUT_ON = {"norm_output": True}


def llama_reduced_vocab_without_d2t_refused(module):
    _reduced_vocab_without_d2t_refused(module, LLAMA)


def mla_reduced_vocab_without_d2t_refused(module):
    _reduced_vocab_without_d2t_refused(module, MLA)


_LLAMA_NBF = {"norm_before_fc": (NBF_CONFIG[0], ("norm_before_fc", "0.5.17", LLAMA)),
              "eagle_config.norm_before_fc": (NBF_EAGLE[0], ("norm_before_fc", "0.5.17"))}
_MLA_NBF = {"norm_before_fc": (NBF_CONFIG[0], ("norm_before_fc", "through 0.5.23", MLA)),
            "eagle_config.norm_before_fc": (NBF_EAGLE[0], ("norm_before_fc", "through 0.5.23"))}


def _later(since):
    return {"fc_norm": (FC_NORM_ON, ("fc_norm", since)), "use_aux_norm": (AUX_NORM_ON, ("fc_norm", since)),
            "norm_output": (NORM_OUT_ON, ("norm_output", since))}


def llama_no_switch_read(module):
    """g1 (0.5.1-0.5.11): fc_norm is read from 0.5.12, norm_before_fc from 0.5.17: refused. norm_output
    (read from 0.5.12) loads as published: alone it may be SpecForge 0.2.0's switch, which these
    releases run as trained (patcher/drafter/facts.py, SPECFORGE_NORM_OUTPUT)."""
    later = _later("0.5.12")
    del later["norm_output"]
    _switches(module, LLAMA, {**_LLAMA_NBF, **later}, (NORM_OUT_ON,))


def llama_norm_before_fc_unread(module):
    """g2, g3 (0.5.12-0.5.16): fc_norm / norm_output are read; norm_before_fc only from 0.5.17."""
    _switches(module, LLAMA, _LLAMA_NBF, (FC_NORM_ON, AUX_NORM_ON, NORM_OUT_ON))


def llama_every_switch_read(module):
    """g4 (0.5.17+): the Llama drafter reads every EAGLE 3.1 switch; none may be refused."""
    _switches(module, LLAMA, {}, (FC_NORM_ON, AUX_NORM_ON, NORM_OUT_ON, NBF_CONFIG[0], NBF_EAGLE[0]))


def mla_no_switch_read(module):
    """g2 (0.5.12): the MLA drafter reads fc_norm / norm_output from 0.5.13, norm_before_fc never."""
    _switches(module, MLA, {**_MLA_NBF, **_later("0.5.13")}, ())


def mla_norm_before_fc_unread(module):
    """g3, g4 (0.5.13+): fc_norm / norm_output are read; norm_before_fc by no release through 0.5.23."""
    _switches(module, MLA, _MLA_NBF, (FC_NORM_ON, AUX_NORM_ON, NORM_OUT_ON))
