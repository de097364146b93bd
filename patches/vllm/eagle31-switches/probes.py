"""Probes for vllm/eagle31-switches. check(module) raises AssertionError.

The speculators checks get vllm.transformers_utils.configs.speculators.algos and drive the converter the
config loader uses for a speculators-format EAGLE-3 drafter (SUPPORTED_SPECULATORS_TYPES["eagle3"],
i.e. update_eagle3) on a stand-in speculators config, one EAGLE 3.1 switch at a time: the switch
must either reach the Transformers config the drafter class reads, or be refused at once with a
message naming it and the release that honours it. Nothing in between (dropped in silence).

The MLA checks get vllm.model_executor.models.deepseek_eagle3 and drive the real
Eagle3DeepseekV2ForCausalLM (the class HF-format MLA drafters such as Kimi K2.6's EAGLE 3.1 drafter
are built as; their config.json is read as written) on stand-ins: its constructor on a real
DeepseekV3Config, its combine_hidden_states on a stand-in model whose norms are known scalings.
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


# The MLA class: fc_norm and norm_output are honoured from 0.22.0 with kimi-patcher (fc_norm as
# published from 0.23.0, vllm-project/vllm#43482; norm_output as published from 0.22.0).
MLA_SWITCHES = ("fc_norm", "norm_output")
MLA_FIRST_HONOURED = {"fc_norm": "0.22.0", "norm_output": "0.22.0"}


class _ConstructorPassedTheCheck(Exception):
    """Raised by the stand-in vllm_config once the constructor goes on to size the drafter."""


def _build_drafter(drafter_class, hf_config) -> Exception:
    """The exception drafter_class(vllm_config=...) raises on a stand-in vllm_config whose draft
    config is `hf_config`; _ConstructorPassedTheCheck means the constructor accepted the config and
    went on to ask the target's layer count."""
    from types import SimpleNamespace

    def target_layers(*_args, **_kw):
        raise _ConstructorPassedTheCheck()

    vllm_config = SimpleNamespace(
        speculative_config=SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=hf_config)),
        model_config=SimpleNamespace(get_num_layers=target_layers),
        parallel_config=SimpleNamespace(),
    )
    try:
        drafter_class(vllm_config=vllm_config)
    except Exception as exc:  # the outcome under test
        return exc
    raise AssertionError("the stand-in vllm_config cannot build a drafter; the constructor returned")


def _build_mla_drafter(module, **switches) -> Exception:
    """Eagle3DeepseekV2ForCausalLM on a real DeepseekV3Config with `switches` (_build_drafter)."""
    hf_config = module.DeepseekV3Config(hidden_size=64, vocab_size=128, **switches)
    return _build_drafter(module.Eagle3DeepseekV2ForCausalLM, hf_config)


def mla_drafter_refuses_fc_norm_and_norm_output(module) -> None:
    """W3-W4 (0.18.0-0.21.0): the MLA class has neither switch; building it with one set must fail
    at once naming the switch and the release that honours it, and a plain config must pass."""
    for key in MLA_SWITCHES:
        exc = _build_mla_drafter(module, **{key: True})
        assert not isinstance(exc, _ConstructorPassedTheCheck), (
            f"Eagle3DeepseekV2ForCausalLM accepted {key}: true although this release never applies it: "
            "the drafter would draft from other features in silence"
        )
        text = str(exc)
        assert isinstance(exc, ValueError) and key in text and MLA_FIRST_HONOURED[key] in text, (
            f"the refusal must be a ValueError naming {key} and vLLM {MLA_FIRST_HONOURED[key]}: "
            f"{type(exc).__name__}: {text}"
        )
    exc = _build_mla_drafter(module, **{k: False for k in MLA_SWITCHES})
    assert isinstance(exc, _ConstructorPassedTheCheck), (
        f"an MLA drafter with every EAGLE 3.1 switch off was refused: {type(exc).__name__}: {exc}"
    )


def mla_drafter_applies_fc_norm(module) -> None:
    """W5 (0.22.x, backport), 0.23.0+ as published: combine_hidden_states normalises each aux layer's
    chunk with its own fc_norm before fc, and leaves the features alone when fc_norm is off."""
    from types import SimpleNamespace

    import torch

    scales = (2.0, 3.0, 5.0)  # stand-in norms: a known, different scaling per aux layer
    norms = [lambda chunk, s=s: chunk * s for s in scales]
    features = torch.arange(1.0, 13.0).reshape(2, 6)  # 2 tokens, 3 aux layers of width 2
    combine = module.Eagle3DeepseekV2ForCausalLM.combine_hidden_states

    def stand_in(fc_norm):
        return SimpleNamespace(model=SimpleNamespace(fc=lambda x: x, fc_norm=fc_norm, num_aux_hidden_states=3))

    got = combine(stand_in(norms), features)
    wanted = torch.cat([c * s for c, s in zip(features.chunk(3, dim=-1), scales)], dim=-1)
    assert torch.equal(got, wanted), (
        f"fc_norm is built and loaded but fc got {got.tolist()} instead of the per-layer normed "
        f"{wanted.tolist()}: unnormalised aux features in silence"
    )
    plain = combine(stand_in(None), features)
    assert torch.equal(plain, features), f"without fc_norm the features changed: {plain.tolist()}"


def mla_drafter_refuses_norm_before_fc(module) -> None:
    """W3-W7 (0.18.0-0.24.0): no release's MLA class has input_norm, and up to 0.24.0 its loader skips
    the input_norm.* weights (`if name not in params_dict: continue`): norm_before_fc must be refused
    when the drafter is built, and a config without it must pass."""
    exc = _build_mla_drafter(module, norm_before_fc=True)
    assert not isinstance(exc, _ConstructorPassedTheCheck), (
        "Eagle3DeepseekV2ForCausalLM accepted norm_before_fc: true although it has no input_norm and its "
        "loader skips the input_norm.* weights: fc would get unnormalised features in silence"
    )
    text = str(exc)
    assert isinstance(exc, ValueError) and "norm_before_fc" in text, (
        f"the refusal must be a ValueError naming norm_before_fc: {type(exc).__name__}: {text}"
    )
    exc = _build_mla_drafter(module, norm_before_fc=False)
    assert isinstance(exc, _ConstructorPassedTheCheck), (
        f"an MLA drafter with norm_before_fc off was refused: {type(exc).__name__}: {exc}"
    )


# The Llama class on an HF-format config (read as written, not converted): norm_output is read by the
# class from 0.22.0; before that, the family refuses it when the drafter is built.
def _build_llama_drafter(module, **switches) -> Exception:
    """Eagle3LlamaForCausalLM on a real transformers LlamaConfig with `switches` (_build_drafter)."""
    from transformers import LlamaConfig

    return _build_drafter(module.Eagle3LlamaForCausalLM, LlamaConfig(hidden_size=64, vocab_size=128, **switches))


def llama_drafter_refuses_norm_output(module) -> None:
    """W1-W4 (0.11.1-0.21.0): Eagle3LlamaForCausalLM does not read norm_output. An HF-format config
    that marks it as EAGLE 3.1's (with norm_before_fc, which SpecForge 0.2.0 never writes) must be
    refused when the drafter is built, naming it and 0.22.0; norm_output alone may be SpecForge
    0.2.0's switch, which this release runs as trained: it must pass, as must no switch at all."""
    exc = _build_llama_drafter(module, norm_output=True, norm_before_fc=True)
    assert not isinstance(exc, _ConstructorPassedTheCheck), (
        "Eagle3LlamaForCausalLM accepted an EAGLE 3.1 config with norm_output: true although this release "
        "never reads it: later draft steps would get pre-norm states in silence"
    )
    text = str(exc)
    assert isinstance(exc, ValueError) and "norm_output" in text and FIRST_HONOURED["norm_output"] in text, (
        f"the refusal must be a ValueError naming norm_output and vLLM {FIRST_HONOURED['norm_output']}: "
        f"{type(exc).__name__}: {text}"
    )
    for switches in ({"norm_output": True}, {"norm_output": False}):
        exc = _build_llama_drafter(module, **switches)
        assert isinstance(exc, _ConstructorPassedTheCheck), (
            f"a Llama drafter with {switches} was refused, which this release runs as SpecForge 0.2.0 "
            f"trains it: {type(exc).__name__}: {exc}"
        )
