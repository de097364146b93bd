"""Probes for eagle3-loud-fc-skip.

Call the installed `LlamaModel.forward` (llama_eagle3.py) or `Eagle3MLAModel.forward`
(kimi_k25_eagle3.py, the Kimi-K2.5 MLA drafter) unbound with a stand-in `self` and forward
batch. The patched check runs first; any later access to the batch raises _Reached, which
means "the check let this case through", so no attention / layers run.
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


class _ParallelFc:
    """SGLang's ColumnParallelLinear as the MLA drafter builds fc from 0.5.15: `input_size`, no `in_features`."""

    def __init__(self, fc_in):
        self.input_size = fc_in

    def __call__(self, *a, **k):
        raise _Reached("fc")


def _model(fc_in, eagle_config=None, parallel_fc=False):
    import torch

    def reached(*a, **k):
        raise _Reached("embed_tokens")

    if fc_in is None:
        fc = None
    elif parallel_fc:
        fc = _ParallelFc(fc_in)
    else:
        fc = torch.nn.Linear(fc_in, HIDDEN, bias=False)
    return SimpleNamespace(
        config=SimpleNamespace(hidden_size=HIDDEN, **({"eagle_config": eagle_config} if eagle_config else {})),
        fc=fc,
        embed_tokens=reached,
        is_mrope_enabled=False,
    )


def _run(module, fc_in, eagle_config=None, cls="LlamaModel", parallel_fc=False, **batch):
    import torch

    try:
        getattr(module, cls).forward(
            _model(fc_in, eagle_config, parallel_fc), torch.zeros(3, dtype=torch.long),
            torch.zeros(3, dtype=torch.long), _Batch(**batch),
        )
    except _Reached:
        return "passed"
    except RuntimeError as e:
        return e
    return "passed"


def single_layer_aux_fails_loudly(module, cls="LlamaModel", parallel_fc=False):
    three = 3 * HIDDEN
    # The field failure: extend step, one layer (HIDDEN) delivered, fc expects 3 x HIDDEN.
    r = _run(module, three, cls=cls, parallel_fc=parallel_fc, width=HIDDEN)
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
        r = _run(module, three, cls=cls, parallel_fc=parallel_fc, **kw)
        assert r == "passed", f"{what} was rejected: {r}"
    # SGLang builds fc 3 x wide even for a drafter trained on one layer; its config says so.
    r = _run(module, three, eagle_config={"use_aux_hidden_state": False}, cls=cls, parallel_fc=parallel_fc,
             width=HIDDEN)
    assert r == "passed", f"drafter with use_aux_hidden_state=false was rejected: {r}"
    for fc_in, what in ((HIDDEN, "single-layer drafter (fc.in_features == hidden)"), (None, "drafter without fc")):
        r = _run(module, fc_in, cls=cls, parallel_fc=parallel_fc, width=HIDDEN)
        assert r == "passed", f"{what} was rejected: {r}"


def mla_single_layer_aux_fails_loudly(module):
    """The same cases through the K2.5 MLA drafter, with fc built either way its releases build it."""
    single_layer_aux_fails_loudly(module, cls="Eagle3MLAModel")
    single_layer_aux_fails_loudly(module, cls="Eagle3MLAModel", parallel_fc=True)
    # Its configs may carry eagle_config as an object rather than a dict (_get_eagle_aux_layer_count reads both).
    r = _run(module, 3 * HIDDEN, eagle_config=SimpleNamespace(use_aux_hidden_state=False), cls="Eagle3MLAModel",
             width=HIDDEN)
    assert r == "passed", f"MLA drafter with an eagle_config object saying use_aux_hidden_state=false was rejected: {r}"
