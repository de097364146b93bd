"""What an engine release does with an EAGLE-3 drafter: derived from its family states.

Most facts follow from the state of one patch family on the release (``release.Release``):
- key names: ``<engine>/eagle3-drafter-keys`` applied or upstream -> both ``midlayer.*`` and
  ``layers.0.*`` load; otherwise only ``midlayer.*`` (SGLang <= 0.5.11 as published).
- unknown keys: SGLang drops them in silence unless our ``eagle3-drafter-keys`` variant is
  applied (it raises); vLLM indexes its parameters and fails loudly.
- aux layer ids on SGLang: ``sglang/eagle3-aux-layer-ids`` applied or upstream -> 0.5.13's rule
  in eager and graph mode alike.

The facts the manifests have no home for yet live in the two tables below, and only there;
tests/test_drafter_release.py proves every row against the published wheels' files.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..manifest import contains
from .release import Release

MIDLAYER = "midlayer."
LAYERS0 = "layers.0."
KEYS_FAMILY = "eagle3-drafter-keys"
AUX_IDS_FAMILY = "eagle3-aux-layer-ids"  # backports 0.5.11's no-re-call and 0.5.13's shift rule

# The first release whose model registry resolves each architecture (vLLM renames a drafter's
# "X" to "Eagle3X" unless it starts with Eagle3: transformers_utils/configs/eagle.py; from 0.10.1
# "...Eagle3" endings are kept). SGLang resolves a class by its __name__ (EntryClass).
REGISTERED_SINCE: dict[str, dict[str, str]] = {
    "vllm": {"Eagle3LlamaForCausalLM": "0.9.0", "LlamaForCausalLMEagle3": "0.10.1",
             "Eagle3DeepseekV2ForCausalLM": "0.18.0", "Eagle3DeepseekV3ForCausalLM": "0.18.0",
             "DeepseekV3ForCausalLM": "0.9.0", "KimiK25ForConditionalGeneration": "0.15.0"},
    "sglang": {"LlamaForCausalLMEagle3": "0.5.1", "Eagle3DeepseekV2ForCausalLM": "0.5.12",
               "DeepseekV3ForCausalLM": "0.5.1", "KimiK25ForConditionalGeneration": "0.5.9"},
}

# SGLang's DeepSeek/Kimi capture as published, before our aux-ids family: whether building the
# CUDA graphs (CudaGraphRunner.__init__, from 0.5.6 also ModelRunner._dummy_run) re-calls
# set_eagle3_layers_to_capture() with no ids (the graphs are captured with the default, and the
# drafter's ids are set only afterwards, for eager passes), and which explicit ids get +1.
_SGLANG_AUX_AS_PUBLISHED: tuple[tuple[SpecifierSet, bool, str], ...] = (
    (SpecifierSet(">=0.5.4.post2,<0.5.11"), True, "all"),
    (SpecifierSet(">=0.5.11,<0.5.13"), False, "all"),
    (SpecifierSet(">=0.5.13"), False, "first-is-1"),
)


def registered_since(engine: str, arch: str) -> Version | None:
    since = REGISTERED_SINCE[engine].get(arch)
    return Version(since) if since else None


def registers(release: Release, arch: str) -> bool | None:
    """Whether the release's registry resolves ``arch``; None: no release known, or one older
    than the table covers (its oldest entries are the first release of our coverage window)."""
    if release.version is None:
        return None
    if release.version < min(Version(v) for v in REGISTERED_SINCE[release.name].values()):
        return None
    since = registered_since(release.name, arch)
    return since is not None and release.version >= since


# SGLang maps `layers.0.*` itself from 0.5.12 (legacy_name_map, #24663): our v2 of
# eagle3-drafter-keys only makes that loader loud, so its state says nothing about key names there.
SGLANG_MAPS_LAYERS0 = Version("0.5.12")


def _native_layers0(release: Release) -> bool:
    return release.name == "sglang" and release.version is not None and release.version >= SGLANG_MAPS_LAYERS0


def loader_accepts(release: Release) -> frozenset[str] | None:
    """Decoder-layer key prefixes the release's drafter loader maps onto its parameters."""
    state = release.state(KEYS_FAMILY)
    if state is None:
        return None
    both = state in ("applied", "upstream") or _native_layers0(release)
    return frozenset({MIDLAYER, LAYERS0}) if both else frozenset({MIDLAYER})


def accepts_via_our_patch(release: Release, scheme: str) -> bool:
    return scheme == LAYERS0 and release.state(KEYS_FAMILY) == "applied" and not _native_layers0(release)


def unknown_keys_fail_loudly(release: Release) -> bool:
    # SGLang's load_weights has `if name in params_dict:` and no else in every release; our
    # eagle3-drafter-keys variant adds the raise. vLLM indexes params_dict: a KeyError.
    return release.name == "vllm" or release.state(KEYS_FAMILY) == "applied"


def reads_speculators_config(release: Release) -> bool:
    """Whether the release understands a `speculators`-format config.json."""
    # vLLM: transformers_utils/configs/speculators/ since 0.10.1.1. SGLang: never.
    return release.name == "vllm" and release.version is not None and release.version >= Version("0.10.1.1")


def max_decoder_layers(release: Release) -> int | None:
    """How many decoder layers the Llama EAGLE-3 drafter can build; None: as configured."""
    if release.version is None:
        return None
    if release.name == "vllm":
        return 1 if release.version < Version("0.11.1") else None
    # 0.5.12 moved from self.midlayer to self.layers (with the layers.0 name map).
    return None if _native_layers0(release) else 1


def default_aux_layer_ids(num_layers: int) -> list[int]:
    # Both engines' default when the drafter config names none: (2, N//2, N-3), taken as given.
    return [2, num_layers // 2, num_layers - 3]


@dataclass(frozen=True)
class AuxCapture:
    """The target layers the engine captures for a drafter, per mode."""

    eager: list[int]
    graph: list[int]
    why: str  # what in the release makes them so


def shift_rule(release: Release) -> tuple[bool, str] | None:
    """(graph re-call resets ids, which ids get +1: "all" / "first-is-1" / "none") on SGLang."""
    if release.name != "sglang":
        return (False, "none")
    if release.state(AUX_IDS_FAMILY) in ("applied", "upstream"):
        return (False, "first-is-1")
    if release.version is None:
        return None
    for spec, recall, shift in _SGLANG_AUX_AS_PUBLISHED:
        if contains(spec, release.version):
            return (recall, shift)
    return None  # no DeepSeek capture at all: the setup findings say so


def aux_capture(release: Release, ids: list[int] | None, num_layers: int | None) -> AuxCapture | None:
    default = default_aux_layer_ids(num_layers) if num_layers is not None else None
    rule = shift_rule(release)
    if rule is None:
        return None
    recall, shift = rule
    if ids is None:
        return None if default is None else AuxCapture(default, default, "no explicit ids: the default")
    add = 1 if shift == "all" or (shift == "first-is-1" and ids[:1] == [1]) else 0
    eager = [i + add for i in ids]
    why = {"none": "ids as given", "all": "adds 1 to every explicit id",
           "first-is-1": "adds 1 only to an id list starting at 1 (0.5.13's rule)"}[shift]
    if recall:
        if default is None:
            return AuxCapture(eager, [], why + "; building the CUDA graphs resets them to the default "
                              "[2, N//2, N-3] (pass --target to know N)")
        return AuxCapture(eager, default, why + "; building the CUDA graphs re-calls the setter with no ids, "
                          "so graph passes capture the default")
    return AuxCapture(eager, eager, why)


def correct_algorithm_flag(engine: str) -> str:
    if engine == "sglang":
        return "--speculative-algorithm EAGLE3"
    return """--speculative-config '{"method": "eagle3", "model": "DRAFTER", "num_speculative_tokens": 3}'"""
