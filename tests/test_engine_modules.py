"""The engine-module contract (issue 35): what one module under patcher/engine_specs/ must provide
for an engine, and that the shared code asks it instead of branching on the engine's name.

A third engine is its module (``SPEC``: the fields below that have no default), ``patches/<engine>/``
with its families and releases.txt, its CPU env lock files, and its tests; tests/test_third_engine.py
runs a toy one through apply, verify and doctor with nothing else changed. No line of the shared code
names an engine in any form (a comparison, a lookup, a call, a dict key).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import types
import typing
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher import engine_specs
from patcher.core import manifest
from patcher.drafter import flag_checks
from patcher.engine_specs import base
from patcher.engine_specs.base import DrafterReading, EngineSpec, LaunchReading

PACKAGE = Path(__file__).resolve().parent.parent / "patcher"
ENGINES = engine_specs.NAMES
# The engines with each capability (issue 59): a test of one runs over those that have it, never by name.
WITH_LAUNCH = [s.name for s in engine_specs.ALL if s.launch is not None]
WITH_DRAFTER = [s.name for s in engine_specs.ALL if s.drafter is not None]
WITH_ENV = [s.name for s in engine_specs.ALL if s.env is not None]

# What an engine module provides: SPEC's fields, and those of its launch and drafter readings.
CONTRACT = {cls.__name__: [f.name for f in dataclasses.fields(cls)]
            for cls in (EngineSpec, LaunchReading, DrafterReading)}
# The rules an engine states as functions, and the arguments the shared code passes them.
RULES = {"ids_taken": ["ask", "runner", "top", "in_eagle", "layer_ids"],
         "no_capture": ["ask", "runner", "target_arch"],
         "switch_weights": ["ask", "switch", "drafter_class", "prefix"]}


def test_the_contract_is_what_the_descriptions_declare():
    """The lists above are read from the dataclasses; this pins them, so a field added to the
    contract is a decision made here, with its meaning in base.py. The fields an engine must
    state come first; the rest are capabilities whose default is an engine without them (issue 59),
    and within a capability, how an engine reads a drafter has no default: facts to prove per engine."""
    assert CONTRACT == {
        "EngineSpec": ["name", "title", "distribution", "package", "first_covered", "launch", "drafter", "order",
                       "cpu_env_lines", "cpu_imports", "cpu_shims", "cpu_install", "probe_preload",
                       "env", "registered_since"],
        "LaunchReading": ["serve_commands", "spellings", "eagle3_flags", "method_option", "eagle_methods", "read",
                   "modules", "cli_module", "serve_takes_model", "dashes_or_underscores", "checks", "runner",
                   "flag_check", "parser_child",
                   "alias_prefixes", "method_aliases", "eagle_without_drafter_is_mtp", "plain_draft_methods",
                   "mtp_declarations",
                   "mtp_model", "mtp_arch_lists"],
        "DrafterReading": ["since", "model_runners", "runners", "default_runner", "loader_strict",
                           "adds_model_prefix", "ids_keys", "mla_model_type", "eagle_with_eagle3_drafter",
                           "multi_layer_since",
                           "capture_family", "aux_ids_as_published", "aux_ids_family", "rope_parameters_read",
                           "eagle31_guard", "eagle31_facts_family", "eagle31_read_since", "built_classes",
                           "ids_taken", "no_capture", "switch_weights", "loader_child", "loader_argv",
                           "loader_options", "decoder_spellings"],
    }
    required = {cls.__name__: [f.name for f in dataclasses.fields(cls)
                               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
                for cls in (EngineSpec, LaunchReading, DrafterReading)}
    # Five members every engine states (issue 59); launch and drafter are capabilities, None without.
    # An engine whose drafter loader patcher cannot run says "cannot tell" about the keys (issue 52).
    assert required == {"EngineSpec": CONTRACT["EngineSpec"][:5], "LaunchReading": CONTRACT["LaunchReading"][:6],
                        "DrafterReading": CONTRACT["DrafterReading"][:-4]}


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_module_provides_the_whole_contract(engine):
    module = getattr(engine_specs, engine)
    spec = module.SPEC
    assert isinstance(spec, EngineSpec) and spec.name == engine and spec in engine_specs.ALL
    hints = {cls: typing.get_type_hints(cls) for cls in (EngineSpec, LaunchReading, DrafterReading)}
    for obj in (o for o in (spec, spec.launch, spec.drafter) if o is not None):  # a capability is None or whole
        for field in dataclasses.fields(obj):
            value = getattr(obj, field.name)
            want = hints[type(obj)][field.name]
            origin = typing.get_origin(want) or want
            if origin in (typing.Union, types.UnionType):  # optional: None says "every release", "no family"
                origin = tuple(typing.get_origin(a) or a for a in typing.get_args(want))
            assert isinstance(value, origin), (engine, field.name, value)
    for rule, args in RULES.items() if spec.drafter is not None else ():
        fn = getattr(spec.drafter, rule)
        assert callable(fn) and fn is getattr(module, rule), (engine, rule)
        assert list(inspect.signature(fn).parameters) == args, (engine, rule)


@pytest.mark.parametrize("engine", WITH_DRAFTER)
def test_each_drafter_reading_is_well_formed(engine):
    spec = engine_specs.spec(engine)
    d = spec.drafter_rules
    # a behaviour is named where it is asked: base (the shared code asks it) or the engine's own rules
    named = (base, importlib.import_module(d.ids_taken.__module__))
    behaviours = {v for m in named for k, v in vars(m).items() if k.isupper() and isinstance(v, str) and " " in v}
    assert set(d.since) <= behaviours and d.multi_layer_since in behaviours
    assert all(Version(v) >= Version(spec.first_covered) for v in d.since.values())
    families = {p.parent.name for p in (manifest.PATCHES / engine).glob("*/patch.toml")}
    named = [d.capture_family[0], d.aux_ids_family, d.eagle31_guard, d.eagle31_facts_family]
    assert {f for f in named if f} <= families, "every family an engine's rules name exists for it"
    for spec_text, _recall, shift in d.aux_ids_as_published:
        SpecifierSet(spec_text)
        assert shift in ("all", "first-is-1")
    for spec_text in d.rope_parameters_read or ():
        SpecifierSet(spec_text)
    assert bool(d.eagle31_facts_family) == bool(d.built_classes) != bool(d.eagle31_read_since)
    assert list(inspect.signature(d.eagle_with_eagle3_drafter).parameters) == ["findings", "release", "drafter"]
    # ids_keys says what ids_taken does, on a release that has every behaviour and every fix
    for key, top, in_eagle in (("top-level", [1, 2, 3], None), ("eagle_config", None, [1, 2, 3])):
        taken = d.ids_taken(_AskYes(), base.V1, top, in_eagle, None)
        assert (taken.source == key) == (key in d.ids_keys), (engine, key, taken)


@pytest.mark.parametrize("engine", WITH_LAUNCH)
def test_each_launch_reading_is_well_formed(engine):
    launch = engine_specs.spec(engine).launch_rules
    for check in launch.checks:  # doctor hands each one LaunchContext
        assert list(inspect.signature(check).parameters) == ["ctx"], (engine, check)
    assert launch.serve_commands or launch.modules, "a launch reading names how the server starts"
    # doctor reads these keys where an engine spells them; one it does not is an option it lacks
    assert set(launch.spellings) <= {"model", "tp", "pp", "draft", "speculative_config", "algorithm"}, engine


@pytest.mark.parametrize("engine", WITH_ENV)
def test_each_environment_reading_is_well_formed(engine):
    spec = engine_specs.spec(engine)
    assert spec.env is not None
    rules = importlib.import_module(spec.env.read.__module__)  # a constant there says what each one does
    assert set(spec.env.names) <= {v for k, v in vars(rules).items() if k.endswith("_ENV")}


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engines_cpu_env_is_well_formed(engine):
    spec = engine_specs.spec(engine)
    assert spec.cpu_install in ("sources", "pip")
    home = Path(importlib.import_module(f"patcher.engine_specs.{engine}").__file__).parent
    for line in spec.cpu_env_lines:  # beside the engine's module: a new engine touches no shared folder
        assert line.lock.is_file() and line.lock.parent == home / "cpu_envs", line.lock
    # and in the wheel: test_layout's wheel test builds one and finds each lock in it


class _AskYes:
    """A release that has every behaviour and every family fixed (engine_specs' ``Ask``)."""

    name, version = "", None

    def since(self, behaviour):
        return True

    def fixed(self, family):
        return True

    def state(self, family):
        return "applied"

    def applied(self, family):
        return True


@pytest.mark.parametrize("engine", ENGINES)
def test_an_engines_behaviour_lives_in_its_own_module(engine):
    """Issue 45: every rule an engine states as code (its launch checks, flag check, env rules, runner
    and drafter rules) is defined in its own module or package, not handed in from the shared code."""
    spec = engine_specs.spec(engine)
    launch, env, drafter = spec.launch, spec.env, spec.drafter
    rules = [*(launch.checks if launch else ()), launch.flag_check if launch else None,
             *((env.read, env.parse) if env else ()),
             *((getattr(drafter, f.name) for f in dataclasses.fields(drafter)) if drafter else ())]
    own = (f"patcher.engine_specs.{engine}", "patcher.engine_specs.base")  # base: a plain engine's default
    for fn in (r for r in rules if callable(r)):
        assert fn.__module__.startswith(own), (engine, fn.__qualname__, fn.__module__)


# --- the shared code asks the module --------------------------------------------------------------

def _names(path: Path) -> list[int]:
    """Lines naming an engine in code, in any form (issue 45: the count of ``==`` alone saw 1 of 21):
    a comparison ``x == "vllm"``, ``x in ("vllm", ...)``, ``"vllm" if ... else``, a lookup
    ``SINCE["vllm"]``, a call ``flag("sglang")``, a dict key ``{"vllm": ...}``. Docstrings are prose."""
    tree = ast.parse(path.read_text())
    prose = {id(node.body[0].value) for node in ast.walk(tree)
             if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
             and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return sorted({node.lineno for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and node.value in ENGINES and id(node) not in prose})


def test_the_shared_code_asks_the_engine_module_instead_of_naming_it():
    """No line of patcher/ outside engine_specs/ names an engine (issue 45: 21 lines did). The CPU
    envs' sitecustomize.py is left out: it runs inside an engine's env, and its "vllm" is a module
    that SGLang's env stubs (``cpu_shims``), not an engine patcher acts on."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith("engine_specs/") or "cpu_envs" in rel:
            continue
        lines = _names(path)
        if lines:
            found[rel] = lines
    assert found == {}, "a line naming an engine outside its module: ask the module instead"


def test_the_name_finder_sees_each_form():
    import textwrap
    src = textwrap.dedent('''
        """A docstring may say vllm."""
        a = x == "vllm"
        b = "sglang" != y
        c = z in ("vllm", "other")
        d = "vllm" if q else "sglang"
        e = x == "other"
        f = SINCE["sglang"]
        g = flag("vllm")
        h = {"sglang": 1}
        i = "vllm/serve"
    ''')
    tmp = PACKAGE.parent / "tests" / "_branch_probe.py"
    try:
        tmp.write_text(src)
        assert _names(tmp) == [3, 4, 5, 6, 8, 9, 10]
    finally:
        tmp.unlink()


def test_the_state_words_an_engines_rules_compare_are_the_planners():
    """Engine modules compare a family's state with base's words (they import nothing of core): the
    words must be plan.State's values, or a check would never match."""
    from patcher.core.plan import State

    assert [base.APPLIED, base.UPSTREAM, base.PENDING, base.LOST, base.REFUSED, base.UNKNOWN_STATE] == [
        State.APPLIED, State.UPSTREAM, State.PENDING, State.LOST, State.REFUSED, State.UNKNOWN]


def test_an_engine_without_a_flag_reader_gets_no_verdict_on_its_flags(tmp_path):
    """A plain engine (no ``LaunchReading.flag_check``): --flags is not judged, and the line says so."""
    plain = dataclasses.replace(engine_specs.spec("sglang"), name="plain", title="Plain")
    plain = dataclasses.replace(plain, launch=dataclasses.replace(plain.launch, flag_check=None))
    (f,) = flag_checks.check_flags("--speculative-algorithm EAGLE3", plain, tmp_path, False)
    assert (f.level, f.code) == ("hint", "flags.engine") and "no reader of Plain's speculative flags" in f.message
