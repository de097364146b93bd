"""What an engine release does with an EAGLE-3 drafter: derived from its family states.

Most facts follow from the state of one patch family on the release (``release.Release``):
- key names: ``<engine>/eagle3-drafter-keys`` applied or upstream -> both ``midlayer.*`` and
  ``layers.0.*`` load; otherwise only ``midlayer.*`` (SGLang <= 0.5.11 as published).
- unknown keys: SGLang drops them in silence unless our ``eagle3-drafter-keys`` variant is
  applied (it raises); vLLM indexes its parameters and fails loudly.
- aux layer ids on SGLang: ``sglang/eagle3-aux-layer-ids`` applied or upstream -> 0.5.13's rule
  in eager and graph mode alike.

The facts the manifests have no home for yet live in the tables below, and only there (every
comparison of a release's version with a table happens here: ``since`` and the table readers);
tests/test_drafter_release.py proves every row against the published wheels' files. The launch
flags each engine takes for an EAGLE-3 drafter are here too (``flag_checks`` judges a line by them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher import engine_specs
from patcher.core import matrix
from patcher.core.manifest import contains
from patcher.core.plan import OK_STATES, State
from patcher.drafter.key_names import LAYERS0, MIDLAYER
from patcher.release import launch_facts
from patcher.release.release import FamilyState, Release

KEYS_FAMILY = "eagle3-drafter-keys"
AUX_IDS_FAMILY = "eagle3-aux-layer-ids"  # backports 0.5.11's no-re-call and 0.5.13's shift rule
MLA_CAPTURE_FAMILY = "mla-aux-capture"  # vllm: DeepSeek/Kimi targets capture aux states (upstream 0.18.0)
K25_CAPTURE_FAMILY = "k25-aux-capture"  # sglang: the Kimi-K2.5 wrapper forwards the EAGLE-3 hooks
# Families whose manifests other branches add; keyed by id only, so "after patcher apply" answers
# follow from their states the moment their manifests are merged (absent: no family, nothing changes).
CONFIG_AUX_IDS_FAMILY = "eagle3-config-aux-ids"  # vllm: both runners read eagle_config ids as 0.22.0's v1 does
# A release refuses at load the EAGLE 3.1 switches it ignores (vLLM's also carries some, as later
# upstream releases do: its manifest's [[drafter_fact]] entries say which, per release and class).
EAGLE31_FAMILY = "eagle31-switches"  # vllm
SGLANG_GUARDS_FAMILY = "eagle3-drafter-guards"  # sglang: switches and a missing d2t refused at load

# The first release whose model registry resolves each architecture: each engine's description
# (engine_specs.<engine>.SPEC.registered_since).
REGISTERED_SINCE: dict[str, dict[str, str]] = {s.name: s.registered_since for s in engine_specs.ALL}

# SGLang's DeepSeek/Kimi capture as published, before our aux-ids family: whether building the
# CUDA graphs (CudaGraphRunner.__init__, from 0.5.6 also ModelRunner._dummy_run) re-calls
# set_eagle3_layers_to_capture() with no ids (the graphs are captured with the default, and the
# drafter's ids are set only afterwards, for eager passes), and which explicit ids get +1.
_SGLANG_AUX_AS_PUBLISHED: tuple[tuple[SpecifierSet, bool, str], ...] = (
    (SpecifierSet(">=0.5.4.post2,<0.5.11"), True, "all"),
    (SpecifierSet(">=0.5.11,<0.5.13"), False, "all"),
    (SpecifierSet(">=0.5.13"), False, "first-is-1"),
)


# The first release with each behaviour the checks ask about (``since`` compares; nothing else does).
SPECULATORS_CONFIG = "reads speculators configs"  # vLLM: transformers_utils/configs/speculators/
MULTI_LAYER_LLAMA = "builds a multi-layer Llama drafter"  # vLLM: before it, one layer whatever the config
V2_RUNNER = "has the v2 model runner"  # vllm/v1/worker/gpu/, VLLM_USE_V2_MODEL_RUNNER=1
V2_AUX = "has the v2 runner's EAGLE-3 aux path"  # gpu/spec_decode/eagle/eagle3_utils.py
V1_EAGLE_CONFIG_IDS = "v1 reads eagle_config ids"
# The v2 runner's last fallback: eagle_config["layer_ids"], as given, when nothing else states ids
# (get_eagle3_aux_layers_from_config; tests/test_drafter_release.py reads it on every release).
V2_EAGLE_LAYER_IDS = "v2 reads eagle_config.layer_ids"
SKIPS_INPUT_NORM = "skips input_norm.* when norm_before_fc is off"
MAPS_LAYERS0 = "maps layers.0.* itself"  # SGLang: legacy_name_map, #24663 (0.5.12 moved to self.layers)
SINCE: dict[str, dict[str, Version]] = {
    "vllm": {SPECULATORS_CONFIG: Version("0.10.1.1"), MULTI_LAYER_LLAMA: Version("0.11.1"),
             V2_RUNNER: Version("0.12.0"), V2_AUX: Version("0.17.0"), V1_EAGLE_CONFIG_IDS: Version("0.22.0"),
             V2_EAGLE_LAYER_IDS: Version("0.27.0"),
             SKIPS_INPUT_NORM: Version("0.18.0")},
    "sglang": {MAPS_LAYERS0: Version("0.5.12")},
}


def since(release: Release, behaviour: str) -> bool | None:
    """Whether the release has ``behaviour``; None: no release known. False for an engine the
    table has no entry for (it never has that behaviour)."""
    if release.version is None:
        return None
    first = SINCE[release.name].get(behaviour)
    return first is not None and release.version >= first


def registered_since(engine: str, arch: str) -> Version | None:
    first = REGISTERED_SINCE[engine].get(arch)
    return Version(first) if first else None


def registers(release: Release, arch: str) -> bool | None:
    """Whether the release's registry resolves ``arch``; None: no release known, or one older
    than the table covers (its oldest entries are the first release of our coverage window)."""
    if release.version is None:
        return None
    if release.version < min(Version(v) for v in REGISTERED_SINCE[release.name].values()):
        return None
    first = registered_since(release.name, arch)
    return first is not None and release.version >= first


# SGLang maps `layers.0.*` itself from 0.5.12: our v2 of eagle3-drafter-keys only makes that
# loader loud, so its state says nothing about key names there.
SGLANG_MAPS_LAYERS0 = SINCE["sglang"][MAPS_LAYERS0]


def _native_layers0(release: Release) -> bool:
    return bool(since(release, MAPS_LAYERS0))


def loader_accepts(release: Release) -> frozenset[str] | None:
    """Decoder-layer key prefixes the release's drafter loader maps onto its parameters."""
    state = release.state(KEYS_FAMILY)
    if state is None:
        return None
    both = state in OK_STATES or _native_layers0(release)
    return frozenset({MIDLAYER, LAYERS0}) if both else frozenset({MIDLAYER})


def accepts_via_our_patch(release: Release, scheme: str) -> bool:
    return scheme == LAYERS0 and release.state(KEYS_FAMILY) is State.APPLIED and not _native_layers0(release)


def unknown_keys_fail_loudly(release: Release) -> bool:
    # SGLang's load_weights has `if name in params_dict:` and no else in every release; our
    # eagle3-drafter-keys variant adds the raise. vLLM indexes params_dict: a KeyError.
    return release.name == "vllm" or release.state(KEYS_FAMILY) is State.APPLIED


def reads_speculators_config(release: Release) -> bool:
    """Whether the release understands a `speculators`-format config.json."""
    return bool(since(release, SPECULATORS_CONFIG))  # SGLang: never


def max_decoder_layers(release: Release) -> int | None:
    """How many decoder layers the Llama EAGLE-3 drafter can build; None: as configured."""
    if release.version is None:
        return None
    if release.name == "vllm":
        return None if since(release, MULTI_LAYER_LLAMA) else 1
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
    if release.state(AUX_IDS_FAMILY) in OK_STATES:
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
    return engine_specs.spec(engine).launch.eagle3_flags


# --- which ids each engine path reads, and whether the target captures at all -----------------
# vLLM has two model runners. v1 (vllm/v1/worker/gpu_model_runner.py) and, from 0.12.0, v2
# (vllm/v1/worker/gpu/, VLLM_USE_V2_MODEL_RUNNER=1), whose EAGLE-3 aux path exists from 0.17.0
# (gpu/spec_decode/eagle/eagle3_utils.py). Both read the drafter's top-level
# `eagle_aux_hidden_state_layer_ids` on every release; v1 also reads the `eagle_config` copy from
# 0.22.0, v2 never (from 0.27.0 it reads `eagle_config["layer_ids"]`, a key no training tool
# writes). From 0.29.0 `VllmConfig.use_v2_model_runner` makes v2 the default for DeepSeek/Kimi
# targets with EAGLE-3. SGLang reads `eagle_config` only (ModelRunner.initialize).
VLLM_V2_AUX_SINCE = SINCE["vllm"][V2_AUX]
VLLM_V1_READS_EAGLE_CONFIG_IDS = SINCE["vllm"][V1_EAGLE_CONFIG_IDS]
K25_TARGET = "KimiK25ForConditionalGeneration"
V1, V2 = "v1", "v2"


def after_apply(release: Release) -> Release:
    """The release once 'patcher apply' has run on it: every pending (or lost) family applied."""
    fams = tuple(replace(f, state=State.APPLIED, detail="after 'patcher apply'")
                 if f.state in (State.PENDING, State.LOST)
                 else f for f in release.families)
    return replace(release, families=fams)


def _fixed(release: Release, family: str) -> bool | None:
    """Whether ``<engine>/<family>`` holds on the release; None: no such family for this engine."""
    state = release.state(family)
    return None if state is None else state in OK_STATES


def vllm_runners(release: Release) -> tuple[str, ...]:
    """The runners the release ships, read from its files when it is installed (launch_facts)."""
    if release.version is None:
        return (V1,)
    return launch_facts.vllm_runners(release.version, release.site)


# The targets whose model carries the DeepSeek MLA decoder (and its aux capture, or not).
MLA_TARGETS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration")


def vllm_default_runner(release: Release, target_arch: str | None) -> str:
    """The runner a launch without VLLM_USE_V2_MODEL_RUNNER uses for this target: the rule is
    patcher/release/launch_facts.py's (doctor also reads the environment); this is its env-less half.
    "unknown" when the release picks by architecture and the target's is not known."""
    if release.version is None:
        return V1
    var = launch_facts.env_vars("vllm", release.site).get(launch_facts.V2_RUNNER_ENV)
    if var is None:  # no install to read: what the releases declare (unset reads as "0" before 0.22.0)
        var = launch_facts.EnvVar(launch_facts.V2_RUNNER_ENV, True,
                                  "0" if release.version < launch_facts.V2_ENV_TRISTATE_SINCE else None)
    runner = launch_facts.vllm_runner(release.version, {}, var, (target_arch,) if target_arch else None,
                                      runners=vllm_runners(release),
                                      default_v2=launch_facts.default_v2_architectures(release.site))
    return {"v2": V2, "v1": V1}.get(runner.name, UNKNOWN_RUNNER)


UNKNOWN_RUNNER = "unknown"


@dataclass(frozen=True)
class IdsTaken:
    ids: list[int] | None  # None: no ids read, the engine's default applies
    source: str  # "top-level", "eagle_config" or "default"
    why: str = ""  # why ids the drafter states were not read


def ids_taken(release: Release, runner: str, top: list[int] | None, in_eagle: list[int] | None,
              layer_ids: list[int] | None = None) -> IdsTaken:
    """The aux layer ids an engine path reads from the drafter's config.json. Which key wins, in
    order: vLLM: the top level, then eagle_config's eagle_aux_hidden_state_layer_ids (v1 0.22.0+, or
    patched), then, on the v2 runner from 0.27.0 only, eagle_config's layer_ids; SGLang: eagle_config's
    eagle_aux_hidden_state_layer_ids alone (layer_ids is never read)."""
    if release.name == "sglang":
        if in_eagle is not None:
            return IdsTaken(in_eagle, "eagle_config")
        why = ("SGLang reads ids only from eagle_config's eagle_aux_hidden_state_layer_ids"
               if top is not None or layer_ids is not None else "")
        return IdsTaken(None, "default", why)
    if top is not None:
        return IdsTaken(top, "top-level")  # both runners, every release; it wins over eagle_config
    if in_eagle is None:
        if layer_ids is not None and runner == V2 and since(release, V2_EAGLE_LAYER_IDS):
            return IdsTaken(layer_ids, "eagle_config.layer_ids")
        if layer_ids is not None:
            where = ("the v1 runner never reads eagle_config.layer_ids" if runner == V1 else
                     f"the v2 runner reads eagle_config.layer_ids only from {SINCE['vllm'][V2_EAGLE_LAYER_IDS]}")
            return IdsTaken(None, "default", where)
        return IdsTaken(None, "default")
    if _fixed(release, CONFIG_AUX_IDS_FAMILY):
        return IdsTaken(in_eagle, "eagle_config")
    if runner == V1 and since(release, V1_EAGLE_CONFIG_IDS):
        return IdsTaken(in_eagle, "eagle_config")
    why = ("the v2 runner reads no ids from eagle_config" if runner == V2 else
           f"the v1 runner reads eagle_config ids only from {VLLM_V1_READS_EAGLE_CONFIG_IDS}")
    return IdsTaken(None, "default", why)


def trained_layers(speculators_format: bool, ids: list[int] | None) -> tuple[list[int] | None, str]:
    """The target layers a drafter was trained on, in the capture-before-layer numbering vLLM,
    speculators and SGLang's default use, with what the ids mean when that differs from as given.

    speculators writes that numbering, always. SpecForge and EAGLE-repo configs may use the
    output-of-layer numbering, recognisable by a list starting at 1: SGLang 0.5.13's rule
    (sgl-project/sglang#25454) reads such a list as layers i + 1, and so does this check."""
    if ids is None:
        return None, ""
    if not speculators_format and ids[:1] == [1]:
        layers = [i + 1 for i in ids]
        return layers, (f"{ids} start at 1: SpecForge's numbering (output of layer i), read as SGLang 0.5.13 "
                        f"reads it: the target layers {layers} in the numbering vLLM and speculators use")
    return list(ids), ""


@dataclass(frozen=True)
class Capture:
    """What the target captures for a drafter on one release and engine path."""

    eager: list[int]
    graph: list[int]  # [] with eager ids: the default, N unknown
    why: str
    nothing: bool = False  # the target captures no aux hidden states at all
    stops: str = ""  # the load stops before anything is captured, with this error


def capture(release: Release, runner: str, top: list[int] | None, in_eagle: list[int] | None,
            target_arch: str | None, n: int | None, layer_ids: list[int] | None = None) -> Capture | None:
    """None: not known (no release, the default without the target's layer count, or the capture
    family ``unknown`` on this release: nothing places it, so nothing is said of what it captures)."""
    if target_arch is not None and target_arch not in MLA_TARGETS:
        return None  # a target class the facts do not cover: its capture is not known
    family, targets = ((MLA_CAPTURE_FAMILY, MLA_TARGETS) if release.name == "vllm" else
                       (K25_CAPTURE_FAMILY, (K25_TARGET,)))
    if target_arch in targets and release.state(family) is State.UNKNOWN:
        return None
    if release.name == "vllm":
        if target_arch in MLA_TARGETS and _fixed(release, MLA_CAPTURE_FAMILY) is False:
            return Capture([], [], f"its DeepSeek/Kimi model has no EAGLE-3 aux capture "
                           f"(vllm/{MLA_CAPTURE_FAMILY} is {release.state(MLA_CAPTURE_FAMILY)})", nothing=True)
        if runner == V2 and since(release, V2_AUX) is False:
            return Capture([], [], f"the v2 runner has no EAGLE-3 aux path before {VLLM_V2_AUX_SINCE}", nothing=True)
    elif target_arch == K25_TARGET and _fixed(release, K25_CAPTURE_FAMILY) is False:
        # The model runner calls set_eagle3_layers_to_capture on the target for EAGLE3, unguarded, and
        # the wrapper has none (tests/test_drafter_release.py reads both on the releases concerned).
        return Capture([], [], f"the Kimi-K2.5 wrapper has no set_eagle3_layers_to_capture, which the model "
                       f"runner calls for EAGLE3 (sglang/{K25_CAPTURE_FAMILY} is {release.state(K25_CAPTURE_FAMILY)})",
                       nothing=True, stops="AttributeError")
    elif target_arch in MLA_TARGETS and shift_rule(release) is None and release.version is not None:
        return Capture([], [], "its DeepSeek model has no EAGLE-3 aux capture", nothing=True)
    taken = ids_taken(release, runner, top, in_eagle, layer_ids)
    cap = aux_capture(release, taken.ids, n)
    if cap is None:
        return None
    why = cap.why
    if taken.why:
        why = f"{taken.why}, so {why}"
    elif taken.source != "default" and top is not None and in_eagle is not None and top != in_eagle:
        why = f"the {taken.source} ids; {why}"
    return Capture(cap.eager, cap.graph, why)


# --- EAGLE 3.1 switches ---------------------------------------------------------------------------
# `norm_before_fc` (one RMSNorm over the concatenated aux states, weight `input_norm.weight`),
# `fc_norm` (an RMSNorm per aux state, `fc_norm.{i}.weight`) and `norm_output` (the post-norm state
# fed to the next draft step; no weight).
# vLLM: the [[drafter_fact]] entries of vllm/eagle31-switches (per switch, config path and drafter
# class, what each release does as published and patched) are the one source; "read since" is the
# first release in releases.txt whose entry is `published = "honoured"` (``_vllm_honoured_since``).
# SGLang (no such manifest facts): the first release whose drafter class (llama_eagle3.py /
# kimi_k25_eagle3.py) reads each one; a switch missing from a class's table is read by no release.
# tests/test_drafter_release.py proves both on every cached wheel.
EAGLE31_SWITCHES = ("norm_before_fc", "fc_norm", "norm_output")
SWITCH_WEIGHTS = {"norm_before_fc": "input_norm.", "fc_norm": "fc_norm."}
EAGLE31_READ_SINCE: dict[str, dict[str, dict[str, str]]] = {
    "sglang": {"llama": {"fc_norm": "0.5.12", "norm_output": "0.5.12", "norm_before_fc": "0.5.17"},
               "mla": {"fc_norm": "0.5.13", "norm_output": "0.5.13"}},
}
# SpecForge 0.2.0 spells another switch `norm_output`. Its Llama drafter (the only EAGLE-3 class it
# trains, HF layout) reads `getattr(config, "norm_output", True)` and applies the final norm before
# lm_head only when true (specforge/modeling/draft/llama3_eagle.py:1690, :1773), while its training
# loop feeds the next draft step the pre-norm backbone output whatever the key says
# (specforge/algorithms/eagle3/model.py:386-400). So its `true` (and its default, no key) is plain
# EAGLE-3, and its `false` is an lm_head on the un-normed state, which no engine release runs. Both
# engines read the key as EAGLE 3.1's (the post-norm state fed to the next step). SpecForge took
# EAGLE 3.1's meaning in sgl-project/SpecForge#879, after 0.2.0. It has no norm_before_fc: a config
# or checkpoint with it is not a SpecForge 0.2.0 drafter. tests/support/real_drafters.py checks
# this on the wheel.
SPECFORGE_NORM_OUTPUT_REF = "sgl-project/SpecForge#879"
SPECFORGE_NORM_OUTPUT = ("SpecForge 0.2.0 and earlier write norm_output for another switch: the final norm "
                         "before lm_head (on by default), with the pre-norm state fed to the next draft step")
# vLLM's Llama drafter loader skips `input_norm.*` without a word when norm_before_fc is off
# (skip_substrs); every other tensor without a parameter stops its AutoWeightsLoader.
VLLM_SKIPS_INPUT_NORM = SINCE["vllm"][SKIPS_INPUT_NORM]
HONOURED, REFUSED, DROPPED = "honoured", "refused", "dropped"
# The class vLLM builds for each drafter class the check tells apart. Every speculators EAGLE-3
# drafter is converted to the Llama class (update_eagle3): its path's entries name that class.
_VLLM_CLASS = {"llama": "Eagle3LlamaForCausalLM", "mla": "Eagle3DeepseekV2ForCausalLM"}


def _vllm_honoured_since(fam: FamilyState, switch: str, path: str, drafter: str) -> Version | None:
    """The first covered release whose [[drafter_fact]] for (switch, path, class) says the release
    as published honours it; None: none does."""
    honoured = [f.versions for f in fam.family.drafter_facts
                if (f.key, f.path, f.drafter) == (switch, path, drafter) and f.published == HONOURED]
    releases = sorted(Version(v) for v in matrix.releases(fam.family.engine, fam.family.folder.parent.parent))
    return next((v for v in releases if any(contains(spec, v) for spec in honoured)), None)


def switch_read_since(release: Release, switch: str, drafter_class: str, speculators_format: bool) -> Version | None:
    """The first release that runs the switch for this drafter as published; None: no release does."""
    if release.name == "vllm":
        fam = release.family(EAGLE31_FAMILY)
        if fam is None:
            return None
        first = _vllm_honoured_since(fam, switch, "config", _VLLM_CLASS[drafter_class])
        if first is None or not speculators_format:
            return first
        # A speculators drafter runs it once the converter carries it (the entries measure that
        # through the Llama class it becomes) and the class the config names reads it.
        carried = _vllm_honoured_since(fam, switch, "speculators", _VLLM_CLASS["llama"])
        return None if carried is None else max(first, carried)
    read = EAGLE31_READ_SINCE[release.name].get(drafter_class, {}).get(switch)
    if read is None or speculators_format:  # SGLang reads no speculators config
        return None
    return Version(read)


def switch_outcome(release: Release, switch: str, drafter_class: str, speculators_format: bool,
                   has_weights: bool, specforge_possible: bool = False) -> tuple[str, str] | None:
    """(honoured / refused / dropped, why) for a switch the drafter turns on; None: release unknown.
    ``specforge_possible``: the drafter's norm_output may be SpecForge 0.2.0's switch (SPECFORGE_NORM_OUTPUT),
    which our guards leave alone (vllm W1-W4, sglang g1 refuse it only beside norm_before_fc): as published."""
    if release.version is None:
        return None
    guarded = not (switch == "norm_output" and specforge_possible)
    from_manifest = _switch_fact(release, switch, drafter_class, speculators_format, guarded)
    if from_manifest is not None:
        return from_manifest
    first = switch_read_since(release, switch, drafter_class, speculators_format)
    if first is not None and release.version >= first:
        return HONOURED, f"read since {release.name} {first}"
    guard = EAGLE31_FAMILY if release.name == "vllm" else SGLANG_GUARDS_FAMILY
    if guarded and _fixed(release, guard):
        return REFUSED, f"{release.name}/{guard} refuses it at load"
    prefix = SWITCH_WEIGHTS.get(switch)
    if has_weights and prefix is not None:
        if release.name == "vllm":
            if switch == "norm_before_fc" and drafter_class == "llama" and since(release, SKIPS_INPUT_NORM):
                return DROPPED, f"the loader skips {prefix}* without a message"
            return REFUSED, f"the loader has no parameter for {prefix}* and stops"
        if unknown_keys_fail_loudly(release):
            return REFUSED, f"our {KEYS_FAMILY} raises on {prefix}* at load"
        return DROPPED, f"the loader skips {prefix}* without a message"
    return DROPPED, "nothing reads it, and no weight trips the loader"


_FACT_OUTCOME = {"honoured": HONOURED, "refused": REFUSED, "raises-at-load": REFUSED,
                 "dropped": DROPPED, "unused": DROPPED}


def _switch_fact(release: Release, switch: str, drafter_class: str, speculators_format: bool, guarded: bool = True):
    """What the family's [[drafter_fact]] entries (read from the wheels) say the release does with
    the switch, as published or with the family applied (``guarded``: where the family's check
    applies to this drafter); None where they say nothing."""
    fam = release.family(EAGLE31_FAMILY) if release.name == "vllm" else None
    if fam is None or release.version is None:
        return None
    cls = _VLLM_CLASS[drafter_class]
    path = "speculators" if speculators_format else "config"
    for fact in fam.family.drafter_facts:
        if (fact.key, fact.path) == (switch, path) and fact.drafter == cls and contains(fact.versions, release.version):
            left_alone = fam.state in OK_STATES and not guarded and fact.patched == "refused"
            fixed = fam.state in OK_STATES and not left_alone
            state = fact.patched if fixed else fact.published
            # the family refuses a speculators config when it is converted, an HF config (the MLA
            # class) when the drafter class is built, before its weights load
            refused = "refused at config load" if path == "speculators" else "refused when the drafter is built"
            how = {"honoured": "read", "refused": refused, "raises-at-load": "stops the load on it",
                   "dropped": "dropped in silence", "unused": "loaded but never applied"}[state]
            where = (f"with {release.name}/{EAGLE31_FAMILY} {fam.state}" if fixed else
                     f"as published: {release.name}/{EAGLE31_FAMILY} leaves a key SpecForge 0.2.0 may have meant alone"
                     if left_alone else "as published")
            return _FACT_OUTCOME[state], f"{release.label()} {how} ({where})"
    return None


# --- RoPE: which config layout the release's own transformers reads -------------------------------
# transformers 5 writes a model's RoPE as `rope_parameters` ({"rope_type", "rope_theta", ...});
# transformers 4 reads only `rope_theta` (LlamaConfig default 10000.0) and `rope_scaling`. SGLang up
# to 0.5.9 pins transformers 4.57.1 and builds the drafter's LlamaConfig with it: a config carrying
# only `rope_parameters` runs at rope_theta 10000 without scaling, in silence. SGLang 0.5.10 pins
# transformers 5 (and 0.5.6.post1 alone pinned 5.0.0rc0). vLLM maps either layout onto
# `rope_parameters` itself (patch_rope_parameters) and reads a speculators config's as written.
SGLANG_TRANSFORMERS5 = (SpecifierSet("==0.5.6.post1"), SpecifierSet(">=0.5.10"))
LEGACY_ROPE_THETA = 10000.0


def reads_rope_parameters(release: Release) -> bool | None:
    """Whether the release reads a drafter's `rope_parameters`; None: release unknown."""
    if release.version is None:
        return None
    return release.name == "vllm" or any(contains(spec, release.version) for spec in SGLANG_TRANSFORMERS5)


def rope(theta: float | None, scaling: dict | None) -> dict:
    """One comparable form: {"rope_theta": t, "rope_type": kind, <scaling fields>}."""
    out = {k: v for k, v in (scaling or {}).items() if k not in ("type", "rope_type", "rope_theta")}
    kind = (scaling or {}).get("rope_type") or (scaling or {}).get("type") or "default"
    out["rope_type"] = kind
    if kind == "default":
        out = {"rope_type": "default"}
    out["rope_theta"] = float(theta) if theta is not None else LEGACY_ROPE_THETA
    return out


def trained_rope(rope_theta: float | None, rope_scaling: dict | None, rope_parameters: dict | None) -> dict:
    """The RoPE a drafter was trained with: transformers 5's `rope_parameters` when written (the
    trainer's own layout), else the legacy pair."""
    if rope_parameters:
        return rope(rope_parameters.get("rope_theta", rope_theta), rope_parameters)
    return rope(rope_theta, rope_scaling)


def rope_as_read(release: Release, rope_theta: float | None, rope_scaling: dict | None,
                 rope_parameters: dict | None) -> dict | None:
    """The RoPE the release runs the drafter with; None: release unknown."""
    modern = reads_rope_parameters(release)
    if modern is None:
        return None
    if modern:
        return trained_rope(rope_theta, rope_scaling, rope_parameters)
    return rope(rope_theta, rope_scaling)


def legacy_rope_fields(trained: dict) -> dict:
    """`rope_theta` + `rope_scaling` that transformers 4 reads as ``trained``."""
    scaling = {k: v for k, v in trained.items() if k != "rope_theta"}
    return {"rope_theta": trained["rope_theta"],
            "rope_scaling": None if scaling.get("rope_type") == "default" else scaling}


# --- SGLang's --speculative-algorithm EAGLE with an EAGLE-3 drafter (the field reports' command) ----------
# Read from every covered release (tests/test_drafter_release.py proves each on the wheels): the aux
# capture is set up only when spec_algorithm.is_eagle3() (model_executor); the worker takes the hot-token
# map only from --speculative-token-map (load_token_map) and shares the target's embed and head with the
# draft model (set_embed_and_head(embed, head)); the drafter's width check applies fc only when the
# hidden state is wider than the embeddings, and one layer of target features is not.
SGLANG_EAGLE_ALGORITHM = {
    "aux.capture": "the target captures no aux hidden states: {release} sets the capture up only for EAGLE3",
    "fc.shape": "fc is never applied: the drafter's width check sees one layer of target features, not three",
    "vocab.d2t": "d2t loads and is never read: with EAGLE the hot-token map comes only from --speculative-token-map",
    "vocab.lm_head": "the trained lm_head is replaced by the target's, the logits still cut to the draft "
                     "vocabulary size",
}
