"""Probes for vllm/eagle3-drafter-keys. Each check(module) raises AssertionError."""

from __future__ import annotations

KEYS = ("midlayer.input_layernorm.weight", "layers.0.input_layernorm.weight")
WANT = "layers.0.input_layernorm.weight"


def drafter_loads_both_key_layouts(module) -> None:
    import torch
    from torch import nn

    cls = module.LlamaModel
    mapper = getattr(cls, "hf_to_vllm_mapper", None)
    if mapper is not None:  # 0.25+: names go through a WeightsMapper before AutoWeightsLoader
        for key in KEYS:
            got = mapper.apply_list([key])
            assert got == [WANT], f"LlamaModel.hf_to_vllm_mapper maps {key!r} to {got}, expected [{WANT!r}]"
        return

    # <= 0.24: LlamaModel.load_weights renames in its loop; drive it on a one-parameter model.
    for key in KEYS:
        model = object.__new__(cls)
        nn.Module.__init__(model)
        model.quant_config = None
        layer = nn.Module()
        layer.input_layernorm = nn.Module()
        layer.input_layernorm.weight = nn.Parameter(torch.zeros(4), requires_grad=False)
        model.layers = nn.ModuleList([layer])
        loaded = model.load_weights([(key, torch.arange(4, dtype=torch.float32))])
        assert WANT in loaded, f"LlamaModel.load_weights({key!r}) loaded {sorted(loaded)}, expected {WANT!r}"
        assert torch.equal(layer.input_layernorm.weight.data, torch.arange(4, dtype=torch.float32)), (
            f"{key!r} did not reach the decoder layer's parameter"
        )
