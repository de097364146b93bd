"""Run inside a vLLM CPU env: the architecture an HF-format EAGLE-3 drafter config gets under each
speculative method, as SpeculativeConfig wraps it (``EAGLEConfig(..., method=m, model_type="eagle")``),
and whether the release's registry has it. Prints one JSON object: method -> [[arch, registered], ...].
"""

import json
import tempfile
from pathlib import Path

import vllm.config  # noqa: F401  (first: the config package before its users)
from vllm.model_executor.models.registry import ModelRegistry
from vllm.transformers_utils.config import get_config
from vllm.transformers_utils.configs.eagle import EAGLEConfig

folder = Path(tempfile.mkdtemp())
(folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
                                                "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
                                                "vocab_size": 128}))
supported = set(ModelRegistry.get_supported_archs())
out = {}
for method in ("eagle", "eagle3"):
    wrapped = EAGLEConfig(get_config(str(folder), trust_remote_code=False), method=method, model_type="eagle")
    out[method] = [[arch, arch in supported] for arch in wrapped.architectures]
print(json.dumps(out))
