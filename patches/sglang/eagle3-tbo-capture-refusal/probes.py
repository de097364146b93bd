"""Probes for sglang/eagle3-tbo-capture-refusal. Each check(module) raises AssertionError.

The target is the real DeepseekV3ForCausalLM over a real DeepseekV2Model, both built with
object.__new__ and given only what the capture hook reads (no weights, no GPU). Two-batch
overlap is turned on the way the scheduler does it: the release's own
initialize_moe_config() is called with the release's ServerArgs defaults and
enable_two_batch_overlap=True, and the MoE flags are put back afterwards (the probes of other
families share this interpreter). The layers the hook must name are computed here from the
split DeepseekV2Model.forward makes when forward_batch.can_run_tbo (the plain loop, the only
one that captures, stops at first_k_dense_replace), restated, not read from the engine. The
capture ids themselves are the release's (its id rule differs with and without
eagle3-aux-layer-ids), so each case reads layers_to_capture after the call.
"""

from __future__ import annotations

import dataclasses
import importlib
from contextlib import contextmanager
from types import SimpleNamespace

LAYERS = 61  # Kimi-K2/K2.5 and DeepSeek-V3 text models
KIMI_FIRST_DENSE = 1
DEEPSEEK_V3_FIRST_DENSE = 3

# (first_k_dense_replace, start_layer, drafter ids) -> whether two-batch overlap leaves a
# capture layer out. start_layer > 0 is the last pipeline-parallel rank.
CASES = (
    (KIMI_FIRST_DENSE, 0, None),  # the default [2, 30, 58]
    (KIMI_FIRST_DENSE, 0, [2, 30, 58]),  # speculators' default for Kimi
    (DEEPSEEK_V3_FIRST_DENSE, 0, [2, 30, 58]),  # layer 2 captured (one of three): the old silent case
    (DEEPSEEK_V3_FIRST_DENSE, 0, [0, 1]),  # every capture layer in the plain loop: accepted
    (LAYERS, 0, [2, 30, 58]),  # first_k_dense_replace at the end: no overlap split, accepted
    (KIMI_FIRST_DENSE, 31, [2, 30, 58]),  # PP rank past the dense layers: every layer overlapped
)


def skipped_under_tbo(first_dense, start, end, capture):
    """The capture layers of this stage that DeepseekV2Model.forward captures without two-batch
    overlap but not with it (forward's own split when can_run_tbo, in its own names)."""
    normal_start, normal_end = start, end
    if first_dense > normal_start and first_dense < normal_end:
        normal_end = first_dense
    elif first_dense < normal_start:
        normal_end = normal_start = 0
    return [i for i in capture if start <= i < end and not normal_start <= i < normal_end]


def _bare(cls, **attrs):
    obj = object.__new__(cls)
    for k, v in attrs.items():
        object.__setattr__(obj, k, v)  # bypass nn.Module.__setattr__ (no __init__ ran)
    return obj


def _target(ds, first_dense, start=0):
    model = _bare(ds.DeepseekV2Model, layers_to_capture=[], first_k_dense_replace=first_dense,
                  start_layer=start, end_layer=LAYERS)
    return _bare(ds.DeepseekV3ForCausalLM, pp_group=SimpleNamespace(is_last_rank=True),
                 config=SimpleNamespace(num_hidden_layers=LAYERS), model=model,
                 capture_aux_hidden_states=False)


def _server_args(**overrides):
    """The release's ServerArgs defaults as a plain namespace (no __post_init__: no GPU checks)."""
    from sglang.srt.server_args import ServerArgs

    values = {}
    for f in dataclasses.fields(ServerArgs):
        if f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
    values.update(overrides)
    return SimpleNamespace(**values)


@contextmanager
def two_batch_overlap(on):
    """--enable-two-batch-overlap as the scheduler stores it; the MoE flags restored after."""
    utils = importlib.import_module("sglang.srt.layers.moe.utils")
    saved = {k: v for k, v in vars(utils).items() if k.isupper()}
    flags = utils.get_flags().moe if hasattr(utils, "get_flags") else None
    saved_flags = dict(vars(flags)) if flags is not None else None
    try:
        utils.initialize_moe_config(_server_args(enable_two_batch_overlap=on))
        assert utils.is_tbo_enabled() is on, f"initialize_moe_config left is_tbo_enabled() != {on}"
        yield
    finally:
        for k, v in saved.items():
            setattr(utils, k, v)
        if flags is not None:
            vars(flags).clear()
            vars(flags).update(saved_flags)


def _set_and_judge(set_layers, lm, first_dense, start, ids):
    """Call the hook with TBO on; return (raised message or None, skipped layers)."""
    try:
        set_layers(ids)
        message = None
    except ValueError as exc:
        message = str(exc)
    capture = list(lm.model.layers_to_capture)
    assert capture, f"set_eagle3_layers_to_capture({ids}) set no capture layers"
    return message, skipped_under_tbo(first_dense, start, LAYERS, capture)


def _check(message, skipped, where):
    if not skipped:
        assert message is None, f"{where}: every capture layer runs in the plain loop, yet refused: {message}"
        return
    assert message is not None, (
        f"{where}: two-batch overlap skips the capture of layers {skipped}, and the hook accepted it"
    )
    for needed in (str(skipped), "--enable-two-batch-overlap", "0.5.17", "No SGLang release"):
        assert needed in message, f"{where}: the refusal does not say {needed!r}: {message}"


def _cases(ds, wrap=lambda lm: lm):
    with two_batch_overlap(True):
        for first_dense, start, ids in CASES:
            lm = _target(ds, first_dense, start)
            hook = wrap(lm).set_eagle3_layers_to_capture
            message, skipped = _set_and_judge(hook, lm, first_dense, start, ids)
            _check(message, skipped, f"first_k_dense_replace={first_dense}, start_layer={start}, ids={ids}")
    with two_batch_overlap(False):  # the published behaviour without the flag
        lm = _target(ds, KIMI_FIRST_DENSE)
        wrap(lm).set_eagle3_layers_to_capture([2, 30, 58])
        assert lm.capture_aux_hidden_states and lm.model.layers_to_capture, (
            "without --enable-two-batch-overlap the capture must be set as published"
        )


def tbo_refuses_uncaptured_aux_layers(module) -> None:
    _cases(module)


def k25_tbo_refuses_uncaptured_aux_layers(module) -> None:
    """The Kimi-K2.5 wrapper delegates to its DeepseekV3ForCausalLM: the same refusal."""
    ds = importlib.import_module("sglang.srt.models.deepseek_v2")
    _cases(ds, wrap=lambda lm: _bare(module.KimiK25ForConditionalGeneration, language_model=lm))


def upstream_packer_refuses_short_capture(module) -> None:
    """0.5.17+: the packer DeepseekV2Model.forward captures into refuses fewer layers than asked
    (an assert in 0.5.17-0.5.19, a RuntimeError from 0.5.20)."""
    import torch

    packer = module.AuxHiddenStatePacker(3)
    packer.append(torch.zeros(2, 4))
    try:
        packer.finalize()
    except (AssertionError, RuntimeError) as exc:
        assert "captured 1 of 3" in str(exc), str(exc)
    else:
        raise AssertionError("AuxHiddenStatePacker.finalize accepted 1 of 3 captured layers")
