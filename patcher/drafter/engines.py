"""What each engine release's EAGLE-3 Llama drafter loader accepts.

Every engine-version fact the drafter commands rely on lives in the tables below, with
the survey that established it (shared/research/{vllm,sglang}-survey.md). The checks
and the converter ask these functions; they never compare versions themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

ENGINES = ("vllm", "sglang")
MIDLAYER = "midlayer."
LAYERS0 = "layers.0."
KEYS_PATCH_FAMILY = "sglang/eagle3-drafter-keys"

# (engine, first release of the range, decoder prefixes accepted), newest first.
# vLLM: llama_eagle3 remaps midlayer. -> layers.0. in every release 0.9.0..0.33.0.
# SGLang: LlamaForCausalLMEagle3 has self.midlayer through 0.5.11 and silently skips
# other names; 0.5.12 (PR #24663) moved to self.layers with a legacy midlayer map.
_LOADER_PREFIXES: tuple[tuple[str, Version, frozenset[str]], ...] = (
    ("vllm", Version("0"), frozenset({MIDLAYER, LAYERS0})),
    ("sglang", Version("0.5.12"), frozenset({MIDLAYER, LAYERS0})),
    ("sglang", Version("0"), frozenset({MIDLAYER})),
)


def loader_accepts(engine: str, version: Version, keys_patch: str | None) -> frozenset[str]:
    """Decoder-layer key prefixes the release's drafter loader maps onto its parameters.

    ``keys_patch`` is the state of our patch family ``sglang/eagle3-drafter-keys`` on the
    install ("applied", "pending", ...); only "applied" changes what a release accepts.
    """
    if engine == "sglang" and keys_patch == "applied":
        return frozenset({MIDLAYER, LAYERS0})
    for name, since, prefixes in _LOADER_PREFIXES:
        if name == engine and version >= since:
            return prefixes
    raise ValueError(f"unknown engine {engine!r}")


def silently_skips_unknown_keys(engine: str) -> bool:
    # SGLang's load_weights has `if param_name in params_dict:` and no else, in every
    # release; vLLM indexes params_dict and fails loudly on a name it does not know.
    return engine == "sglang"


def reads_speculators_config(engine: str, version: Version) -> bool:
    """Whether the release understands a `speculators`-format config.json."""
    # vLLM: transformers_utils/configs/speculators/ since 0.10.1.1. SGLang: never.
    return engine == "vllm" and version >= Version("0.10.1.1")


def max_decoder_layers(engine: str, version: Version) -> int | None:
    """How many decoder layers the Llama EAGLE-3 drafter can build; None: as configured."""
    if engine == "vllm":
        return 1 if version < Version("0.11.1") else None
    return 1 if version < Version("0.5.12") else None


ARCHITECTURES: dict[str, frozenset[str]] = {
    # vLLM registers both spellings for the same class; SGLang only its own.
    "vllm": frozenset({"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"}),
    "sglang": frozenset({"LlamaForCausalLMEagle3"}),
}


def aux_layer_id_shift(engine: str, version: Version, ids: list[int]) -> int:
    """What the release adds to explicit eagle_aux_hidden_state_layer_ids of a DeepSeek
    (Kimi) target before capturing. vLLM and `speculators` use the ids as given."""
    if engine != "sglang":
        return 0
    if Version("0.5.4.post2") <= version < Version("0.5.13"):
        return 1
    if version >= Version("0.5.13") and ids and ids[0] == 1:
        return 1
    return 0


def default_aux_layer_ids(num_layers: int) -> list[int]:
    # Both engines' default when the drafter config names none: (2, N//2, N-3).
    return [2, num_layers // 2, num_layers - 3]


def correct_algorithm_flag(engine: str) -> str:
    if engine == "sglang":
        return "--speculative-algorithm EAGLE3"
    return """--speculative-config '{"method": "eagle3", "model": "DRAFTER", "num_speculative_tokens": 3}'"""


@dataclass(frozen=True)
class EngineContext:
    """The engine release a drafter is checked against."""

    name: str
    version: Version | None  # None: engine named by --engine but no release known
    keys_patch: str | None  # state of KEYS_PATCH_FAMILY on the install, if detected
    source: str  # "detected", "flags" or "detected+flags"

    def label(self) -> str:
        return f"{self.name} {self.version}" if self.version is not None else self.name
