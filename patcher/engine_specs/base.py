"""The base of every engine module (``patcher.engine_specs``), as pre-commit's ``lang_base`` is
of its languages: the contract (``EngineSpec``, ``LaunchReading``, ``DrafterReading``) with a plain
engine's defaults, the vocabulary the engines' rules share, and the helpers they read a release's
files with (its syntax tree, never an import).

An engine module imports only this, ``patcher.errors``, ``patcher.findings`` and ``patcher.program``: what it needs to
know of a release (its version, its files, whether it has a behaviour, the state of a patch
family) it asks through ``Ask``, which ``patcher.release.release.Release`` answers; what doctor
hands a launch check is a ``LaunchContext``.

Over 300 lines: the contract's three dataclasses are read together (a field's meaning beside its
default), and the helpers beside them are the few every engine's rules share.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher import program
from patcher.findings import Finding, problem

# Behaviours a release has from some version on (``DrafterReading.since`` gives the first), named
# here where the shared drafter code asks them; one engine's own live in its module.
SPECULATORS_CONFIG = "reads speculators configs"  # vLLM: transformers_utils/configs/speculators/
MULTI_LAYER_LLAMA = "builds a multi-layer Llama drafter"  # vLLM: before it, one layer whatever the config
V2_AUX = "has the v2 runner's EAGLE-3 aux path"  # gpu/spec_decode/eagle/eagle3_utils.py
# The v2 runner's last fallback: eagle_config["layer_ids"], as given, when nothing else states ids
# (get_eagle3_aux_layers_from_config; tests/test_drafter_release.py reads it on every release).
V2_EAGLE_LAYER_IDS = "v2 reads eagle_config.layer_ids"
SKIPS_INPUT_NORM = "skips input_norm.* when norm_before_fc is off"
MAPS_LAYERS0 = "maps layers.0.* itself"  # SGLang: legacy_name_map, #24663 (0.5.12 moved to self.layers)
V1, V2 = "v1", "v2"  # vLLM's model runners (an engine with one runner names it "")

# Patch families the shared drafter code names (patches/<engine>/<family>/); a family an engine
# lacks reads None. Those only one engine's rules name live in its module.
KEYS_FAMILY = "eagle3-drafter-keys"  # sglang: layers.0.* keys load; unknown keys raise
AUX_IDS_FAMILY = "eagle3-aux-layer-ids"  # sglang: backports 0.5.11's no-re-call and 0.5.13's shift rule
CONFIG_AUX_IDS_FAMILY = "eagle3-config-aux-ids"  # vllm: both runners read eagle_config ids as 0.22.0's v1 does
EAGLE31_FAMILY = "eagle31-switches"  # vllm: EAGLE 3.1 switches refused at load where ignored

# The targets whose model carries the DeepSeek MLA decoder (and its aux capture, or not).
K25_TARGET = "KimiK25ForConditionalGeneration"
MLA_TARGETS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", K25_TARGET)
# The targets whose EAGLE-3 capture is DeepseekV2ForCausalLM's (the K2.5 wrapper delegates to it).
DEEPSEEK_V2_MODEL_ARCHITECTURES = frozenset({"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                                             K25_TARGET})


# A family's state as ``Ask.state`` returns it (patcher.core.plan.State, a str enum of these words;
# tests/test_engine_modules.py holds them equal).
APPLIED, UPSTREAM, PENDING, LOST, REFUSED, UNKNOWN_STATE = "applied", "upstream", "pending", "lost", "refused", \
    "unknown release"
SPECULATORS = "speculators"  # a drafter config in speculators' format (patcher.drafter.configs)


def contains(spec: SpecifierSet, version: Version) -> bool:
    # prereleases=True: nightlies (0.15.2.dev5+g...) and local builds must match their range.
    return spec.contains(version, prereleases=True)


class Ask:
    """What an engine module's rules ask of one release, answered from its fields.

    ``patcher.release.release.Release`` is this, with its families' states: the answers live here,
    below the engine modules, so that an engine's rule calls down into them and never back up into
    the release's module (benchmarks/code_walk.py counts such trips). The fields are the release's."""

    name: str
    version: Any  # packaging.version.Version, or None: no release known
    site: Path | None  # the install's site-packages, where its files are read; None: no install
    spec: EngineSpec  # the engine's own description
    families: tuple[Any, ...]  # each family's state on it (.family.name, .family.id, .state)
    located_by: str  # " --python X" / " --site Y" when the user named another environment

    def label(self) -> str:
        """"vllm 0.22.1", as messages name the release."""
        return f"{self.name} {self.version}" if self.version is not None else self.name

    def family(self, name: str) -> Any:
        """The state of ``<engine>/<name>``, or None when no such family covers this engine."""
        return next((f for f in self.families if f.family.name == name), None)

    def state(self, name: str) -> Any:
        """The family's state (a ``patcher.core.plan.State``, equal to the words above), or None."""
        fam = self.family(name)
        return fam.state if fam is not None else None

    def since(self, behaviour: str) -> bool | None:
        """Whether the release has ``behaviour`` (``DrafterReading.since``); None: no release known.
        False for a behaviour the engine's table has no entry for (it never has it)."""
        if self.version is None or self.spec.drafter is None:
            return None
        first = self.spec.drafter.since.get(behaviour)
        return first is not None and self.version >= Version(first)

    def fixed(self, name: str) -> bool | None:
        """Whether ``<engine>/<name>`` holds (applied or upstream); None: no such family here."""
        state = self.state(name)
        return None if state is None else state in (APPLIED, UPSTREAM)

    def applied(self, name: str) -> bool:
        """Our variant of the family is in place."""
        return self.state(name) == APPLIED

    def apply_command(self) -> str:
        """The 'patcher apply' line for this install."""
        return program.command(f"apply --engine {self.name}{self.located_by}")


@dataclass(frozen=True)
class LaunchContext:
    """What doctor hands an engine's launch check (``LaunchReading.checks``): the release, the parsed
    command (patcher.release.launch_command.LaunchCommand: .drafter, .tp, .pp, .env, .has(flag),
    .values(flag), .method), the target's config (.architectures) or None, the environment the server
    starts with, and the variables the release reads (``EnvVar``, from ``EngineSpec.variables``)."""

    release: Ask
    cmd: Any
    target: Any
    env: dict[str, str]
    variables: dict[str, EnvVar]
    # the release's own parser read the line (so every option in it exists in this release)
    parsed_by_release: bool = False
    # what the release's start-up configuration resolved (release_parser.Reading.startup), or None
    startup: dict | None = None


@dataclass(frozen=True)
class EnvVar:
    name: str
    read: bool  # whether this release reads it at all
    default: str | None  # as its declaration writes it (os.getenv's second argument, EnvBool's first)
    only: str | None = None  # start-up refuses every other value (VLLM_USE_V2_MODEL_RUNNER on 0.34.0: "1")


@dataclass(frozen=True)
class EnvParsed:
    """A value of a variable, as the release's own declaration parses it."""

    how: str  # how the release parses the variable, in words
    wanted: str  # the values it takes
    raises: str = ""  # the exception the release raises on this value (the server stops)
    ignored: str = ""  # the warning with which it falls back to its default


@dataclass(frozen=True)
class EnvRules:
    """The environment variables doctor reads for an engine, and how the engine's releases declare
    them, read from the install's files (never imported)."""

    names: tuple[str, ...]  # the variables doctor reads (the engine module says what each does)
    read: Callable[[Path], dict[str, EnvVar]]  # (site) -> each of ``names``, as the install declares it
    # (site, name, env) -> the release's own parsing of env[name]; None: not runnable here
    parse: Callable[[Path, str, dict[str, str]], EnvParsed | None]


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
    # the runners a release may ship (which it does is read from its files), each with how a launch
    # selects it, as the drafter check tells the user; {}: one runner
    model_runners: dict[str, str]
    runners: Callable[..., tuple[str, ...]]  # (ask) -> the runners this release ships; ("",): one
    # (ask, target_arch) -> the runner a launch without the engine's runner switch uses; "unknown"
    # where the release picks by the target's architecture and that is not known
    default_runner: Callable[..., str]
    loader_strict: bool  # unknown tensors stop the load as published (vLLM indexes its parameters)
    adds_model_prefix: bool  # the loader prefixes each drafter tensor name with "model."
    # the config keys holding the aux layer ids that it reads, the one that wins first
    # ("top-level", "eagle_config"); ``ids_taken`` is the whole rule
    ids_keys: tuple[str, ...]
    # (drafter, ask, archs) -> the config.format finding for a registered MLA drafter, where the
    # release runs it as MLA only for some model types (vLLM's is_deepseek_mla); None: by architecture
    mla_model_type: Callable[..., Finding] | None
    # (findings, ask, drafter) -> the drafter check's findings rewritten for a launch asking for EAGLE
    # (not EAGLE-3) with an EAGLE-3 drafter (issue 32): what that command does instead
    eagle_with_eagle3_drafter: Callable[..., list[Finding]]
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
    # The release's own drafter loader, run in the engine's interpreter (patcher.release.release_loader):
    # the script beside this module that builds the drafter as the server does and feeds it the
    # checkpoint. None: the loader cannot be asked, and the key findings say "cannot tell".
    loader_child: str | None = None
    # (target, drafter) -> the launch options that make the server load this drafter as EAGLE-3
    loader_argv: Callable[[str, str], list[str]] = field(default=lambda target, drafter: [])
    # the options of a launch that change how the drafter is built or loaded (its dtype, quantisation,
    # config overrides): doctor adds them to ``loader_argv``'s line as the command gives them, so every
    # other spelling of the same launch asks the loader the same question (one cached answer)
    loader_options: tuple[str, ...] = ()
    # which decoder-layer spellings (midlayer.*, layers.0.*) its releases read, in its own words: what
    # the drafter check says where neither its loader nor a patch family's state answers; "": not stated
    decoder_spellings: str = ""


@dataclass(frozen=True)
class CpuEnvLine:
    """A run of releases that import in one CPU venv built from its lock file, which the engine
    keeps beside its module (``<engine>/cpu_envs/<line>.txt``); the file's name names the line."""

    first: str
    last: str | None  # None: open-ended (and a post-release of ``last`` is still in the line)
    lock: Path

    @property
    def name(self) -> str:
        return self.lock.stem


@dataclass(frozen=True)
class CpuImport:
    """A module the CPU env imports for a release (patcher.maintainer.cpu_env): a patched module, on
    the releases ``first``..``last`` (inclusive; None: open), after ``prelude`` in one interpreter."""

    module: str
    first: str | None = None
    last: str | None = None
    prelude: tuple[str, ...] = ()


@dataclass(frozen=True)
class LaunchReading:
    """How a server of the engine is started and how its parser spells the options doctor reads.
    The defaults describe a plain engine: one console command, argparse's own spellings, no
    launch checks of its own, no MTP, and no reader of its parser (doctor reads the spellings)."""

    # The console commands that start the server, as words (``("vllm", "serve")``,
    # ``("trtllm-serve",)``); the first names the engine in reports.
    serve_commands: tuple[tuple[str, ...], ...]
    # option -> every spelling the parser takes. doctor reads "model", "tp", "pp", and the drafter's
    # "draft" or "speculative_config" (its JSON "model") where an engine spells them; a key an engine
    # leaves out is an option its parser lacks (a positional model: ``serve_takes_model``; no PP flag)
    spellings: dict[str, tuple[str, ...]]
    eagle3_flags: str  # the launch flags that run an EAGLE-3 drafter, as a user writes them
    # How a line names the speculative method: the option, and the key holding the method inside
    # the option's JSON value (None: the value is the method); whether the parser upper-cases it.
    method_option: tuple[str, str | None, bool]
    eagle_methods: tuple[str, str]  # EAGLE and EAGLE-3, as that parser reads them
    # The options doctor reads, by the parser's dest, each with the one spelling doctor rewrites it to.
    read: dict[str, str]
    modules: tuple[str, ...] = ()  # ``python -m <module>`` starts the server
    # the module behind the first serve command's console script: ``python -m <cli_module> serve`` is
    # ``vllm serve`` (the words after the script's name follow the module)
    cli_module: str | None = None
    serve_takes_model: bool = False  # ``<serve command> MODEL``: a positional model tag
    dashes_or_underscores: bool = False  # the parser takes ``--a_b`` for ``--a-b`` (vLLM's FlexibleArgumentParser)
    # doctor's engine-specific launch checks: (LaunchContext) -> findings (vLLM's model runner,
    # SGLang's allreduce fusion and two-batch overlap)
    checks: tuple[Callable[[LaunchContext], list[Finding]], ...] = ()
    # An engine with several model runners: (LaunchContext) -> the one this launch uses ("v1", "v2",
    # "unknown"...), decided once so the drafter check judges that runner's capture. None: one runner.
    runner: Callable[[LaunchContext], str] | None = None
    # (values, drafter folder, speculators config) -> the drafter check's judgement of the launch
    # flags (--flags), where ``values[option]`` lists the values the line gives an option, read with
    # its owner's spellings, for every option any engine spells; None: no reader of its flags
    flag_check: Callable[..., list[Finding]] | None = None
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
    # Methods that run the draft as a model of its own, fed tokens only (vLLM's draft_model, which
    # it infers for a speculative config without a method; SGLang's STANDALONE): an EAGLE-3 drafter
    # given one gets no target features, which the drafter check says.
    plain_draft_methods: tuple[str, ...] = ()
    mtp_declarations: tuple[str, ...] = ()
    # Which targets' MTP layers it loads as the draft: a model file and the targets it serves, and
    # the files whose ``if model_arch in [...]`` lists guard "the draft model is the target".
    mtp_model: tuple[str, tuple[str, ...]] | None = None
    mtp_arch_lists: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineSpec:
    """One engine. The five fields without a default are what every engine states: with them and
    its patches, list, apply, verify and revert work. Every other field is a capability, and its
    default is an engine without it (pre-commit's ``Language``: a few required members, the rest
    optional): doctor, the drafter check and the tests ask whether an engine has one (``launch is
    not None``), and where it has not, they say "not checked for this engine", never another
    engine's words."""

    name: str  # what a user types (--engine), patches/<name>/, and every report's "engine"
    title: str  # the engine as a sentence names it
    distribution: str  # the distribution that installs it (pip, importlib.metadata)
    package: str  # the top-level package Python imports, under site-packages
    first_covered: str  # the first release the compatibility matrix reasons about
    # doctor reads its server lines (how they start, how its parser spells the options); None: doctor
    # names the engine from the release's console scripts and judges its install only
    launch: LaunchReading | None = None
    # it runs EAGLE-3 drafters, and this is how it reads one; None: the drafter check runs only the
    # checkpoint's own checks (against the target), and says the engine's reading is not checked
    drafter: DrafterReading | None = None
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
    env: EnvRules | None = None  # the environment variables doctor reads; None: none
    # the first release whose model registry resolves each architecture the drafter check names
    registered_since: dict[str, str] = field(default_factory=dict)

    @property
    def launch_rules(self) -> LaunchReading:
        """``launch``, where the caller has asked that the engine has it (a command it read)."""
        if self.launch is None:
            raise LookupError(f"{self.name} states no launch reading: ask `spec.launch is not None` first")
        return self.launch

    @property
    def drafter_rules(self) -> DrafterReading:
        """``drafter``, where the caller has asked that the engine has it (the drafter check's
        engine-specific checks run only then)."""
        if self.drafter is None:
            raise LookupError(f"{self.name} states no drafter reading: ask `spec.drafter is not None` first")
        return self.drafter


# --- what a plain engine's rules are ---------------------------------------------------------------

def one_runner(ask: Ask) -> tuple[str, ...]:
    return ("",)


def one_runner_default(ask: Ask, target_arch: str | None, env: dict[str, str] | None = None) -> str:
    return ""


# --- the drafter check's launch flags (LaunchReading.flag_check) ------------------------------------

def same_path(a: str, b: Path) -> bool:
    try:
        return Path(a).expanduser().resolve() == b.resolve()
    except OSError:
        return False


def other_draft_path(where: str, named: str, drafter: Path) -> Finding:
    # Every other finding is about the folder checked; a launch that loads another drafter
    # runs something this check never saw, so its verdict says nothing about that launch.
    return problem("flags.draft_path", f"{where} names another drafter than the folder checked: the findings "
                   "here are not about the drafter this launch loads",
                   wanted=str(drafter), found=named,
                   hint="check the folder the launch names, or point the launch at the folder checked")


# --- reading a release's files: its syntax tree, never an import ------------------------------------

_READ: dict[tuple, Any] = {}


def read_once(reader: Callable[[Path], Any], path: Path) -> Any:
    """``reader(path)``, read once per process for each state of the file (its inode, size and
    mtime): doctor and the drafter check ask the same release file many times per launch, and
    ``apply``/``revert`` write a file anew (a new state), so a patched file is never answered from
    its published reading. ``reader`` returns a value nobody mutates (a frozenset, a bool, a tuple)."""
    try:
        st = path.stat()
    except OSError:
        return reader(path)
    key = (reader, str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _READ:
        if len(_READ) > 512:
            _READ.clear()
        _READ[key] = reader(path)
    return _READ[key]


def parse_file(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def compares_to(test: ast.expr, value: str, op: type) -> bool:
    """``<x> <op> "value"``."""
    return (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], op)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == value)


def definitions(tree: ast.Module, env: dict[str, str]) -> dict | None:
    """The module's functions and classes, with its standard-library imports and an ``os`` whose
    environment is ``env``: enough to run an env declaration, never the module's own side effects
    (an engine's envs.py / environ.py). None: they do not run here."""
    import os as real_os
    import sys
    import types

    fake_os = types.ModuleType("os")
    fake_os.__dict__.update(real_os.__dict__)
    vars(fake_os).update(environ=dict(env), getenv=lambda k, d=None: env.get(k, d))
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            roots = [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else \
                [(node.module or "").split(".")[0]]
            if all(r in sys.stdlib_module_names and r != "os" for r in roots) and getattr(node, "level", 0) == 0:
                body.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not (
                isinstance(node, ast.ClassDef) and node.name == "Envs"):
            body.append(node)
    ns: dict = {"os": fake_os, "__name__": "kimi_patcher_envs"}
    try:
        exec(compile(ast.Module(body=body, type_ignores=[]), "<envs definitions>", "exec"), ns)
    except Exception:
        return None
    return ns
