"""Run inside a vLLM CPU env: which MLA drafter ``model_type`` values the release runs as MLA.

For each model type on the command line, an ``Eagle3DeepseekV2ForCausalLM`` config.json (the
DeepSeek-V3 fields of the Kimi community drafter) is read as the release reads a draft model:
``get_config``, then wrapped in ``EAGLEConfig(..., method="eagle3", model_type="eagle")`` as
SpeculativeConfig does, then the release's own ``is_deepseek_mla``. Prints one JSON object:
model type -> true / false, or "error: <type>" where building the config fails.
"""

import json
import sys
import tempfile
from pathlib import Path

import vllm.config  # noqa: F401  (first: the convertor module imports the config package)
from vllm.transformers_utils.config import get_config, get_hf_text_config
from vllm.transformers_utils.configs.eagle import EAGLEConfig
from vllm.transformers_utils.model_arch_config_convertor import ModelArchConfigConvertorBase

FIELDS = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "hidden_size": 7168, "num_hidden_layers": 1,
          "num_attention_heads": 64, "num_key_value_heads": 64, "kv_lora_rank": 512, "q_lora_rank": 1536,
          "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 163840,
          "intermediate_size": 18432, "max_position_embeddings": 262144}

out = {}
for model_type in sys.argv[1:]:
    folder = Path(tempfile.mkdtemp())
    (folder / "config.json").write_text(json.dumps({**FIELDS, "model_type": model_type}))
    try:
        wrapped = EAGLEConfig(get_config(str(folder), trust_remote_code=False), method="eagle3", model_type="eagle")
        out[model_type] = ModelArchConfigConvertorBase(wrapped, get_hf_text_config(wrapped)).is_deepseek_mla()
    except Exception as exc:  # what start-up would stop on
        out[model_type] = f"error: {type(exc).__name__}"
print(json.dumps(out))
