"""What one engine's description holds (``patcher.engine_specs``): frozen data, and the few
rules that differ between engines as functions of what a release answers (``Ask``).

An engine module never imports the rest of patcher: what it needs to know of a release (its
version, whether it has a behaviour, whether a patch family holds on it) it asks through ``Ask``,
which ``patcher.release.release.Release`` answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

# Behaviours a release has from some version on (``DrafterReading.since`` gives the first).
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
V1, V2 = "v1", "v2"  # vLLM's model runners (an engine with one runner names it "")

# Patch families the rules name (patches/<engine>/<family>/); a family an engine lacks reads None.
KEYS_FAMILY = "eagle3-drafter-keys"  # sglang: layers.0.* keys load; unknown keys raise
AUX_IDS_FAMILY = "eagle3-aux-layer-ids"  # sglang: backports 0.5.11's no-re-call and 0.5.13's shift rule
MLA_CAPTURE_FAMILY = "mla-aux-capture"  # vllm: DeepSeek/Kimi targets capture aux states (upstream 0.18.0)
K25_CAPTURE_FAMILY = "k25-aux-capture"  # sglang: the Kimi-K2.5 wrapper forwards the EAGLE-3 hooks
CONFIG_AUX_IDS_FAMILY = "eagle3-config-aux-ids"  # vllm: both runners read eagle_config ids as 0.22.0's v1 does
EAGLE31_FAMILY = "eagle31-switches"  # vllm: EAGLE 3.1 switches refused at load where ignored
SGLANG_GUARDS_FAMILY = "eagle3-drafter-guards"  # sglang: switches and a missing d2t refused at load
LOUD_FC_FAMILY = "eagle3-loud-fc-skip"  # sglang: an fc handed fewer features than it takes raises

# The targets whose model carries the DeepSeek MLA decoder (and its aux capture, or not).
K25_TARGET = "KimiK25ForConditionalGeneration"
MLA_TARGETS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", K25_TARGET)


class Ask(Protocol):
    """What an engine module's rules ask of one release."""

    name: str
    version: Any  # packaging.version.Version, or None: no release known

    def since(self, behaviour: str) -> bool | None: ...  # None: no release known

    def fixed(self, family: str) -> bool | None: ...  # None: the engine has no such family

    def state(self, family: str) -> Any: ...  # the family's state (patcher.core.plan.State) or None

    def applied(self, family: str) -> bool: ...  # our variant of the family is in place


@dataclass(frozen=True)
class IdsTaken:
    """The aux layer ids an engine path reads from a drafter's config.json."""

    ids: list[int] | None  # None: no ids read, the engine's default applies
    source: str  # "top-level", "eagle_config", "eagle_config.layer_ids" or "default"
    why: str = ""  # why ids the drafter states were not read


@dataclass(frozen=True)
class NoCapture:
    """A target that captures no aux hidden states on a release, and why."""

    why: str
    stops: str = ""  # the load stops before anything is captured, with this error


@dataclass(frozen=True)
class DrafterReading:
    """How the engine reads an EAGLE-3 drafter: every engine-specific fact the drafter check and
    doctor use (patcher/drafter/facts.py asks these instead of branching on the engine's name).
    tests/test_drafter_release.py proves each table against the published wheels."""

    since: dict[str, str]  # behaviour -> the first release that has it
    model_runners: tuple[str, ...]  # the runners a release may ship (read from its files); () : one
    loader_strict: bool  # unknown tensors stop the load as published (vLLM indexes its parameters)
    adds_model_prefix: bool  # the loader prefixes each drafter tensor name with "model."
    # the config keys holding the aux layer ids that it reads, the one that wins first
    # ("top-level", "eagle_config"); ``ids_taken`` is the whole rule
    ids_keys: tuple[str, ...]
    # an MLA drafter runs as MLA only for the model types the release's is_deepseek_mla lists
    # (read from its files: patcher.drafter.release_checks)
    mla_by_model_type: bool
    # what a launch asking for EAGLE (not EAGLE-3) does with an EAGLE-3 drafter (issue 32):
    # "runs-without-features" or "stops-at-start-up" (patcher.drafter.checks.EAGLE_RUNS)
    eagle_with_eagle3_drafter: str
    # the family that makes the drafter raise, at the first prefill, where its fc is handed one layer
    # of target features instead of the aux layers it fuses (EAGLE instead of EAGLE3); None: none
    fc_guard: str | None
    multi_layer_since: str  # the behaviour from which the Llama drafter builds more than one layer
    # (family, targets): the family that makes these target classes capture aux states
    capture_family: tuple[str, tuple[str, ...]]
    # The aux-id rule as published, per release range: (specifier, graph capture re-calls the setter
    # with no ids, which explicit ids get +1: "all" / "first-is-1"); () : ids as given, always.
    aux_ids_as_published: tuple[tuple[str, bool, str], ...]
    aux_ids_family: str | None  # the family that makes explicit ids follow SGLang 0.5.13's rule
    rope_parameters_read: tuple[str, ...] | None  # releases (specifiers) reading `rope_parameters`; None: all
    eagle31_guard: str  # the family that refuses at load the EAGLE 3.1 switches a release ignores
    # Where the first release to honour each EAGLE 3.1 switch is written: the [[drafter_fact]]
    # entries of this family's manifest, or (None) the table below, per drafter class.
    eagle31_facts_family: str | None
    eagle31_read_since: dict[str, dict[str, str]]
    built_classes: dict[str, str]  # drafter class -> the class the [[drafter_fact]] entries name
    ids_taken: Callable[..., IdsTaken]  # (ask, runner, top, in_eagle, layer_ids)
    no_capture: Callable[..., NoCapture | None]  # (ask, runner, target_arch): the engine's own gaps
    # (ask, switch, drafter_class, weight prefix) -> (outcome, why): what the loader does with a
    # switch's weights when nothing reads the switch
    switch_weights: Callable[..., tuple[str, str]]


@dataclass(frozen=True)
class CpuEnvLine:
    """A run of releases that import in one CPU venv built from ``cpu_envs/<name>.txt``."""

    first: str
    last: str | None  # None: open-ended (and a post-release of ``last`` is still in the line)
    name: str


@dataclass(frozen=True)
class CpuImport:
    """A module the CPU env imports for a release (patcher.maintainer.cpu_env): a patched module, on
    the releases ``first``..``last`` (inclusive; None: open), after ``prelude`` in one interpreter."""

    module: str
    first: str | None = None
    last: str | None = None
    prelude: tuple[str, ...] = ()


@dataclass(frozen=True)
class Launch:
    """How a server of the engine is started and how its parser spells the options doctor reads.
    The defaults describe a plain engine: one console command, argparse's own spellings, no
    launch checks of its own, no MTP, and no reader of its parser (doctor reads the spellings)."""

    # The console commands that start the server, as words (``("vllm", "serve")``,
    # ``("trtllm-serve",)``); the first names the engine in reports.
    serve_commands: tuple[tuple[str, ...], ...]
    spellings: dict[str, tuple[str, ...]]  # option -> every spelling the parser takes
    eagle3_flags: str  # the launch flags that run an EAGLE-3 drafter, as a user writes them
    # How a line names the speculative method: the option, and the key holding the method inside
    # the option's JSON value (None: the value is the method); whether the parser upper-cases it.
    method_option: tuple[str, str | None, bool]
    eagle_methods: tuple[str, str]  # EAGLE and EAGLE-3, as that parser reads them
    # The options doctor reads, by the parser's dest, each with the one spelling doctor rewrites it to.
    read: dict[str, str]
    modules: tuple[str, ...] = ()  # ``python -m <module>`` starts the server
    cli_module: str | None = None  # ``python -m <cli_module> serve`` is the first serve command
    serve_takes_model: bool = False  # ``<serve command> MODEL``: a positional model tag
    dashes_or_underscores: bool = False  # the parser takes ``--a_b`` for ``--a-b`` (vLLM's FlexibleArgumentParser)
    checks: tuple[str, ...] = ()  # doctor's engine-specific launch checks (patcher.launch.doctor.ENGINE_CHECKS)
    # The release's own parser, run in the engine's interpreter (patcher.release.release_parser):
    # the script beside this module that builds it as the server's entry point does. None: doctor
    # reads the exact spellings only, and every other option token makes its verdict "cannot tell".
    parser_child: str | None = None
    # Without the release's parser (it does not import): option names that may be aliases of an
    # option doctor reads, beyond prefixes, dotted, --config and short forms (vLLM's --spec-*).
    alias_prefixes: tuple[str, ...] = ()
    # Methods as the release resolves them after parsing (SGLang: NEXTN is EAGLE), whether EAGLE
    # without a draft model is the target's own MTP (SGLang sets the draft to the target for
    # DeepSeek-V3 targets), and the files whose Literal types name the release's *_mtp methods.
    method_aliases: dict[str, str] = field(default_factory=dict)
    eagle_without_drafter_is_mtp: bool = False
    mtp_declarations: tuple[str, ...] = ()
    # Which targets' MTP layers it loads as the draft: a model file and the targets it serves, and
    # the files whose ``if model_arch in [...]`` lists guard "the draft model is the target".
    mtp_model: tuple[str, tuple[str, ...]] | None = None
    mtp_arch_lists: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineSpec:
    """One engine. The fields without a default are what every engine states; the defaults are a
    plain engine's (no CPU env, no environment variables doctor reads), so a small engine states
    only what differs (pre-commit's ``lang_base``)."""

    name: str  # what a user types (--engine), patches/<name>/, and every report's "engine"
    title: str  # the engine as a sentence names it
    distribution: str  # the distribution that installs it (pip, importlib.metadata)
    package: str  # the top-level package Python imports, under site-packages
    first_covered: str  # the first release the compatibility matrix reasons about
    launch: Launch
    drafter: DrafterReading
    order: int = 100  # where it comes in every listing: vLLM 0, SGLang 1, a new engine after them
    cpu_env_lines: tuple[CpuEnvLine, ...] = ()
    cpu_imports: tuple[CpuImport, ...] = ()  # what a CPU env imports per release (its probes' modules)
    # import-only shims of cpu_envs/sitecustomize.py: (shim, the first release that no longer
    # needs it; None: every release does)
    cpu_shims: tuple[tuple[str, str | None], ...] = ()
    # how a release is put into its CPU env: "sources" (the wheel's .py files laid in: its compiled
    # kernels never load beside the CPU torch) or "pip" (pip install of the release, no deps)
    cpu_install: str = "pip"
    # third-party modules most probed modules import: the probe zygote imports them once before it
    # forks (patcher/probes/probe_child.py says how they were measured)
    probe_preload: tuple[str, ...] = ()
    # where a release declares the environment variables it reads, relative to site-packages, and
    # how: "getenv" (os.getenv("NAME", default) calls) or "environ" (SGLang's EnvField class)
    env_declarations: tuple[str, str] | None = None
    env_vars: tuple[str, ...] = ()  # the variables doctor reads (patcher.release.launch_facts says what each does)
    # the first release whose model registry resolves each architecture the drafter check names
    registered_since: dict[str, str] = field(default_factory=dict)
