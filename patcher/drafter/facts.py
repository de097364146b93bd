"""What an engine release does with an EAGLE-3 drafter: derived from its family states.

Most facts follow from the state of one patch family on the release (``release.Release``):
- key names: ``<engine>/eagle3-drafter-keys`` applied or upstream -> both ``midlayer.*`` and
  ``layers.0.*`` load; otherwise only ``midlayer.*`` (SGLang <= 0.5.11 as published).
- unknown keys: SGLang drops them in silence unless our ``eagle3-drafter-keys`` variant is
  applied (it raises); vLLM indexes its parameters and fails loudly.
- aux layer ids on SGLang: ``sglang/eagle3-aux-layer-ids`` applied or upstream -> 0.5.13's rule
  in eager and graph mode alike.

These are the rules for where nothing of the release runs. Where the engine imports, the key
verdict is its loader's and the eager capture its own code's (``release_loader``); the checks put
those answers in the rules' place, and the loader grid proves the rules agree with them.

The facts the manifests have no home for yet live in each engine's module
(``patcher.engine_specs.<engine>``: its ``DrafterReading`` tables and rules); this module asks
them and never branches on an engine's name. Every comparison of a release's version with a
table happens in ``Release.since`` and the table readers here (and in ``eagle31`` and ``rope``,
the EAGLE 3.1 switches and the RoPE layout, each a job of its own); tests/test_drafter_release.py
proves every row against the published wheels' files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher import program
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
from patcher.release.release import Release

# The family ids, behaviours and target classes the rules name are the engine modules' vocabulary
# (patcher/engine_specs/base.py), imported above for the checks that read them from here.

def reading(release: Release) -> base.DrafterReading:
    """How the release's engine reads a drafter: every rule below asks it, never the engine's name."""
    return release.spec.drafter_rules


def since(release: Release, behaviour: str) -> bool | None:
    """Whether the release has ``behaviour``; None: no release known (``Release.since``)."""
    return release.since(behaviour)


def registered_since(release: Release, arch: str) -> Version | None:
    """The first release of the engine whose registry resolves ``arch`` (its module's table)."""
    first = release.spec.registered_since.get(arch)
    return Version(first) if first else None


def registers(release: Release, arch: str) -> bool | None:
    """Whether the release's registry resolves ``arch``; None: no release known, an engine whose
    module states no registry, or a release older than the table covers (its oldest entries are
    the first release of our coverage window)."""
    table = release.spec.registered_since
    if release.version is None or not table:
        return None
    if release.version < min(Version(v) for v in table.values()):
        return None
    first = registered_since(release, arch)
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
    fams = tuple(replace(f, state=State.APPLIED, detail=f"after '{program.command('apply')}'")
                 if f.state in (State.PENDING, State.LOST)
                 else f for f in release.families)
    return replace(release, families=fams)


def runners(release: Release) -> tuple[str, ...]:
    """The model runners the release ships ("" for an engine with one): the engine's rule."""
    return reading(release).runners(release)


def default_runner(release: Release, target_arch: str | None, env: dict[str, str] | None = None) -> str:
    """The runner a launch uses for this target (UNKNOWN_RUNNER: the release picks by architecture and
    the target's is not known): the engine's rule; ``env``: the launch's environment (doctor), whose
    variables select a runner, else the default of a launch that sets none."""
    return reading(release).default_runner(release, target_arch, env)


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
