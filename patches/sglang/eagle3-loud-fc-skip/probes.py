"""Probe for eagle3-loud-fc-skip.

Calls the installed `LlamaModel.forward` (llama_eagle3.py) unbound with a stand-in `self`
and forward batch. The patched check runs first; any later access to the batch raises
_Reached, which means "the check let this case through", so no attention / layers run.
"""

from types import SimpleNamespace

HIDDEN = 8


class _Reached(Exception):
    pass


class _Mode:
    def __init__(self, decode):
        self._decode = decode

    def is_decode(self):
        return self._decode

    def __getattr__(self, name):  # any other mode query: we are past the check
        raise _Reached(name)


class _Batch:
    """Only spec_info and forward_mode exist; touching anything else means we got past the check."""

    def __init__(self, width, rows=3, decode=False):
        import torch

        self.spec_info = SimpleNamespace(hidden_states=torch.zeros(rows, width))
        self.forward_mode = _Mode(decode)

    def __getattr__(self, name):
        raise _Reached(name)


def _model(fc_in, eagle_config=None):
    import torch

    def reached(*a, **k):
        raise _Reached("embed_tokens")

    return SimpleNamespace(
        config=SimpleNamespace(hidden_size=HIDDEN, **({"eagle_config": eagle_config} if eagle_config else {})),
        fc=None if fc_in is None else torch.nn.Linear(fc_in, HIDDEN, bias=False),
        embed_tokens=reached,
        is_mrope_enabled=False,
    )


def _run(module, fc_in, eagle_config=None, **batch):
    import torch

    try:
        module.LlamaModel.forward(
            _model(fc_in, eagle_config), torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long),
            _Batch(**batch),
        )
    except _Reached:
        return "passed"
    except RuntimeError as e:
        return e
    return "passed"


def single_layer_aux_fails_loudly(module):
    three = 3 * HIDDEN
    # The field failure: extend step, one layer (HIDDEN) delivered, fc expects 3 x HIDDEN.
    r = _run(module, three, width=HIDDEN)
    assert isinstance(r, RuntimeError), "single-layer aux input silently skipped the drafter's fc"
    for cause in ("set_eagle3_layers_to_capture", "use_aux_hidden_state", "EAGLE3"):
        assert cause in str(r), f"error does not name {cause!r}: {r}"
    # What must keep working.
    ok = {
        "draft-decode step on the drafter's own hidden states": dict(width=HIDDEN, decode=True),
        "extend step with the 3-layer concat": dict(width=three),
        "idle batch (no rows)": dict(width=HIDDEN, rows=0),
    }
    for what, kw in ok.items():
        r = _run(module, three, **kw)
        assert r == "passed", f"{what} was rejected: {r}"
    # SGLang builds fc 3 x wide even for a drafter trained on one layer; its config says so.
    r = _run(module, three, eagle_config={"use_aux_hidden_state": False}, width=HIDDEN)
    assert r == "passed", f"drafter with use_aux_hidden_state=false was rejected: {r}"
    for fc_in, what in ((HIDDEN, "single-layer drafter (fc.in_features == hidden)"), (None, "drafter without fc")):
        r = _run(module, fc_in, width=HIDDEN)
        assert r == "passed", f"{what} was rejected: {r}"
