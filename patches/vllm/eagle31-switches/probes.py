"""Probes for vllm/eagle31-switches. check(module) raises AssertionError.

`module` is vllm.transformers_utils.configs.speculators.algos. Each check drives the converter the
config loader uses for a speculators-format EAGLE-3 drafter (SUPPORTED_SPECULATORS_TYPES["eagle3"],
i.e. update_eagle3) on a stand-in speculators config, one EAGLE 3.1 switch at a time: the switch
must either reach the Transformers config the drafter class reads, or be refused at once with a
message naming it and the release that honours it. Nothing in between (dropped in silence).
"""

from __future__ import annotations

SWITCHES = ("norm_before_fc", "fc_norm", "norm_output")
FIRST_HONOURED = {"norm_before_fc": "0.18.0", "fc_norm": "0.22.0", "norm_output": "0.22.0"}


def _speculators_config(**switches) -> dict:
    """The top level of a speculators EAGLE-3 config.json (speculators 0.9.0 layout)."""
    return {
        "speculators_model_type": "eagle3",
        "draft_vocab_size": 32000,
        "target_hidden_size": 7168,
        "norm_before_residual": True,
        "eagle_aux_hidden_state_layer_ids": [2, 30, 58],
        "transformer_layer_config": {"model_type": "llama", "hidden_size": 7168},
        **switches,
    }


def _convert(module, **switches):
    """(pre-trained config dict, None) or (None, the exception) from the loader's eagle3 converter."""
    convert = module.SUPPORTED_SPECULATORS_TYPES["eagle3"]
    cfg = _speculators_config(**switches)
    out = dict(cfg["transformer_layer_config"])
    try:
        convert(config_dict=cfg, **{_out_name(convert): out})
    except Exception as exc:  # the outcome under test
        return None, exc
    return out, None


def _out_name(fn) -> str:
    """The converter's second parameter: vllm_config (0.11.1-0.15.1) or pre_trained_config."""
    return fn.__code__.co_varnames[1]


def _refused(module, key: str) -> None:
    out, exc = _convert(module, **{key: True})
    assert exc is not None, (
        f"speculators config with {key}: true was converted ({key} -> {None if out is None else out.get(key)!r}) "
        "although this release's drafter does not honour it: dropped in silence or a late KeyError"
    )
    text = str(exc)
    assert isinstance(exc, ValueError) and key in text and FIRST_HONOURED[key] in text, (
        f"the refusal must be a ValueError naming {key} and vLLM {FIRST_HONOURED[key]}: {type(exc).__name__}: {text}"
    )


def _carried(module, key: str) -> None:
    out, exc = _convert(module, **{key: True})
    assert exc is None, f"{key}: true was refused although this release honours it: {exc}"
    assert out.get(key) is True, f"{key}: true did not reach the drafter's config (got {out.get(key)!r})"


def _plain_drafter_converts(module) -> None:
    out, exc = _convert(module, **{k: False for k in SWITCHES})
    assert exc is None, f"a drafter with every EAGLE 3.1 switch off was refused: {exc}"
    assert out.get("architectures"), f"the converter did not run: {out}"
    assert not any(out.get(k) for k in SWITCHES), f"a switch turned itself on: {out}"


def refuses_every_switch(module) -> None:
    """W1-W2 (0.11.1-0.17.1): Eagle3LlamaForCausalLM has none of the three."""
    for key in SWITCHES:
        _refused(module, key)
    _plain_drafter_converts(module)


def carries_norm_before_fc_refuses_the_others(module) -> None:
    """W3-W4 (0.18.0-0.21.0): norm_before_fc reaches the drafter; fc_norm and norm_output are refused."""
    _carried(module, "norm_before_fc")
    _refused(module, "fc_norm")
    _refused(module, "norm_output")
    _plain_drafter_converts(module)


def carries_every_switch(module) -> None:
    """W5-W6 (0.22.0-0.24.0) and upstream (0.25.0+): all three reach the drafter's config."""
    for key in SWITCHES:
        _carried(module, key)
    _plain_drafter_converts(module)
