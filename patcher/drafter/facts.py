"""What an engine release does with an EAGLE-3 drafter: derived from its family states.

Most facts follow from the state of one patch family on the release (``release.Release``):
- key names: ``<engine>/eagle3-drafter-keys`` applied or upstream -> both ``midlayer.*`` and
  ``layers.0.*`` load; otherwise only ``midlayer.*`` (SGLang <= 0.5.11 as published).
- unknown keys: SGLang drops them in silence unless our ``eagle3-drafter-keys`` variant is
  applied (it raises); vLLM indexes its parameters and fails loudly.
- aux layer ids on SGLang: ``sglang/eagle3-aux-layer-ids`` applied or upstream -> 0.5.13's rule
  in eager and graph mode alike.

The facts the manifests have no home for yet live in each engine's module
(``patcher.engine_specs.<engine>``: its ``DrafterReading`` tables and rules); this module asks
them and never branches on an engine's name. Every comparison of a release's version with a
table happens in ``Release.since`` and the table readers here; tests/test_drafter_release.py
proves every row against the published wheels' files.

Over 300 lines: every engine fact the drafter checks read passes through here, so that no check
reads a table or compares a version on its own; its sections (key names, aux ids and capture, EAGLE
3.1 switches, RoPE) share the release questions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher import engine_specs
from patcher.core import matrix
from patcher.core.plan import OK_STATES, State
from patcher.drafter.key_names import LAYERS0, MIDLAYER
from patcher.engine_specs import base
from patcher.engine_specs.base import (  # noqa: F401 (the checks read them from here)
    AUX_IDS_FAMILY,
    CONFIG_AUX_IDS_FAMILY,
    EAGLE31_FAMILY,
    K25_TARGET,
    KEYS_FAMILY,
    MAPS_LAYERS0,
    MLA_TARGETS,
    MULTI_LAYER_LLAMA,
    SKIPS_INPUT_NORM,
    SPECULATORS_CONFIG,
    V1,
    V2,
    V2_AUX,
    V2_EAGLE_LAYER_IDS,
    IdsTaken,
    contains,
)
from patcher.release.release import FamilyState, Release

# The family ids, behaviours and target classes the rules name are the engine modules' vocabulary
# (patcher/engine_specs/base.py), imported above for the checks that read them from here.

# Each engine's tables, as its module states them (engine_specs.<engine>.SPEC), by engine name.
REGISTERED_SINCE: dict[str, dict[str, str]] = {s.name: s.registered_since for s in engine_specs.ALL}
SINCE: dict[str, dict[str, Version]] = {s.name: {b: Version(v) for b, v in s.drafter.since.items()}
                                        for s in engine_specs.ALL}
EAGLE31_READ_SINCE: dict[str, dict[str, dict[str, str]]] = {
    s.name: s.drafter.eagle31_read_since for s in engine_specs.ALL if s.drafter.eagle31_read_since}


def reading(release: Release) -> base.DrafterReading:
    """How the release's engine reads a drafter: every rule below asks it, never the engine's name."""
    return release.spec.drafter


def since(release: Release, behaviour: str) -> bool | None:
    """Whether the release has ``behaviour``; None: no release known (``Release.since``)."""
    return release.since(behaviour)


def registered_since(engine: str, arch: str) -> Version | None:
    first = REGISTERED_SINCE[engine].get(arch)
    return Version(first) if first else None


def registers(release: Release, arch: str) -> bool | None:
    """Whether the release's registry resolves ``arch``; None: no release known, an engine whose
    module states no registry, or a release older than the table covers (its oldest entries are
    the first release of our coverage window)."""
    table = REGISTERED_SINCE[release.name]
    if release.version is None or not table:
        return None
    if release.version < min(Version(v) for v in table.values()):
        return None
    first = registered_since(release.name, arch)
    return first is not None and release.version >= first


# SGLang maps `layers.0.*` itself from 0.5.12: our v2 of eagle3-drafter-keys only makes that
# loader loud, so its state says nothing about key names there.
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
    # A loader that indexes its parameters stops on an unknown key; SGLang's skips it, unless our
    # eagle3-drafter-keys variant (which adds the raise) is applied.
    return reading(release).loader_strict or release.applied(KEYS_FAMILY)


def reads_speculators_config(release: Release) -> bool:
    """Whether the release understands a `speculators`-format config.json."""
    return bool(since(release, SPECULATORS_CONFIG))  # SGLang: never


def max_decoder_layers(release: Release) -> int | None:
    """How many decoder layers the Llama EAGLE-3 drafter can build; None: as configured."""
    if release.version is None:
        return None
    return None if since(release, reading(release).multi_layer_since) else 1


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
    """(graph re-call resets ids, which ids get +1: "all" / "first-is-1" / "none")."""
    rules = reading(release)
    if not rules.aux_ids_as_published:
        return (False, "none")
    if rules.aux_ids_family and release.fixed(rules.aux_ids_family):
        return (False, "first-is-1")
    if release.version is None:
        return None
    for spec_, recall, shift in rules.aux_ids_as_published:
        if contains(SpecifierSet(spec_), release.version):
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
# targets with EAGLE-3. SGLang reads `eagle_config` only (ModelRunner.initialize). Which key each
# path reads is the engine module's rule (``DrafterReading.ids_taken``).


def after_apply(release: Release) -> Release:
    """The release once 'patcher apply' has run on it: every pending (or lost) family applied."""
    fams = tuple(replace(f, state=State.APPLIED, detail="after 'patcher apply'")
                 if f.state in (State.PENDING, State.LOST)
                 else f for f in release.families)
    return replace(release, families=fams)


def runners(release: Release) -> tuple[str, ...]:
    """The model runners the release ships ("" for an engine with one): the engine's rule."""
    return reading(release).runners(release)


def default_runner(release: Release, target_arch: str | None) -> str:
    """The runner a launch uses by default for this target (UNKNOWN_RUNNER: the release picks by
    architecture and the target's is not known): the engine's rule."""
    return reading(release).default_runner(release, target_arch)


UNKNOWN_RUNNER = "unknown"


def ids_taken(release: Release, runner: str, top: list[int] | None, in_eagle: list[int] | None,
              layer_ids: list[int] | None = None) -> IdsTaken:
    """The aux layer ids an engine path reads from the drafter's config.json: the engine's rule
    (engine_specs.<engine>.ids_taken says which key wins, in order)."""
    return reading(release).ids_taken(release, runner, top, in_eagle, layer_ids)


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
    rules = reading(release)
    family, targets = rules.capture_family
    if target_arch in targets and release.state(family) is State.UNKNOWN:
        return None
    gap = rules.no_capture(release, runner, target_arch)
    if gap is not None:
        return Capture([], [], gap.why, nothing=True, stops=gap.stops)
    if target_arch in MLA_TARGETS and shift_rule(release) is None and release.version is not None:
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
# Where an engine's module names a facts family (vLLM: the [[drafter_fact]] entries of
# vllm/eagle31-switches, per switch, config path and drafter class, what each release does as
# published and patched), those entries are the one source; "read since" is the first release in
# releases.txt whose entry is `published = "honoured"` (``_honoured_since``). Otherwise (SGLang) its
# table: the first release whose drafter class (llama_eagle3.py / kimi_k25_eagle3.py) reads each
# one; a switch missing from a class's table is read by no release.
# tests/test_drafter_release.py proves both on every cached wheel.
EAGLE31_SWITCHES = ("norm_before_fc", "fc_norm", "norm_output")
SWITCH_WEIGHTS = {"norm_before_fc": "input_norm.", "fc_norm": "fc_norm."}
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
HONOURED, REFUSED, DROPPED = "honoured", "refused", "dropped"


def _honoured_since(fam: FamilyState, switch: str, path: str, drafter: str) -> Version | None:
    """The first covered release whose [[drafter_fact]] for (switch, path, class) says the release
    as published honours it; None: none does."""
    honoured = [f.versions for f in fam.family.drafter_facts
                if (f.key, f.path, f.drafter) == (switch, path, drafter) and f.published == HONOURED]
    releases = sorted(Version(v) for v in matrix.releases(fam.family.engine, fam.family.folder.parent.parent))
    return next((v for v in releases if any(contains(spec, v) for spec in honoured)), None)


def switch_read_since(release: Release, switch: str, drafter_class: str, speculators_format: bool) -> Version | None:
    """The first release that runs the switch for this drafter as published; None: no release does."""
    rules = reading(release)
    if rules.eagle31_facts_family:
        fam = release.family(rules.eagle31_facts_family)
        if fam is None:
            return None
        first = _honoured_since(fam, switch, "config", rules.built_classes[drafter_class])
        if first is None or not speculators_format:
            return first
        # A speculators drafter runs it once the converter carries it (the entries measure that
        # through the Llama class it becomes) and the class the config names reads it.
        carried = _honoured_since(fam, switch, "speculators", rules.built_classes["llama"])
        return None if carried is None else max(first, carried)
    read = rules.eagle31_read_since.get(drafter_class, {}).get(switch)
    if read is None or speculators_format:  # an engine without such facts (SGLang) reads no speculators config
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
    guard = reading(release).eagle31_guard
    if guarded and release.fixed(guard):
        return REFUSED, f"{release.name}/{guard} refuses it at load"
    prefix = SWITCH_WEIGHTS.get(switch)
    if has_weights and prefix is not None:
        return reading(release).switch_weights(release, switch, drafter_class, prefix)
    return DROPPED, "nothing reads it, and no weight trips the loader"


_FACT_OUTCOME = {"honoured": HONOURED, "refused": REFUSED, "raises-at-load": REFUSED,
                 "dropped": DROPPED, "unused": DROPPED}


def _switch_fact(release: Release, switch: str, drafter_class: str, speculators_format: bool, guarded: bool = True):
    """What the family's [[drafter_fact]] entries (read from the wheels) say the release does with
    the switch, as published or with the family applied (``guarded``: where the family's check
    applies to this drafter); None where they say nothing."""
    rules = reading(release)
    facts_family = rules.eagle31_facts_family
    fam = release.family(facts_family) if facts_family else None
    if fam is None or release.version is None:
        return None
    cls = rules.built_classes[drafter_class]
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
            where = (f"with {release.name}/{facts_family} {fam.state}" if fixed else
                     f"as published: {release.name}/{facts_family} leaves a key SpecForge 0.2.0 may have meant alone"
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
# Each engine's module says which of its releases read it (``DrafterReading.rope_parameters_read``).
LEGACY_ROPE_THETA = 10000.0


def reads_rope_parameters(release: Release) -> bool | None:
    """Whether the release reads a drafter's `rope_parameters`; None: release unknown."""
    if release.version is None:
        return None
    read = reading(release).rope_parameters_read
    return read is None or any(contains(SpecifierSet(s), release.version) for s in read)


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
