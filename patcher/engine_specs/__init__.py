"""One module (or package) per engine: everything that differs between the engines, said once,
its behaviour included (pre-commit's ``languages/``).

Each engine is a module or package here (``vllm/``, ``sglang/``) holding one ``EngineSpec``
(``base.py``): five required members (its name, title, distribution and import package, the first
release we cover), and the capabilities it has, each None or empty without it: the CPU import-env
lines and how a release enters one, how its server is launched and parses options
(``LaunchReading``), its registry, and its behaviour as code: doctor's launch checks (vLLM's model
runner, SGLang's allreduce fusion and two-batch overlap), the environment variables it reads and how
its releases declare and parse them, its flag check, and how it reads an EAGLE-3 drafter
(``DrafterReading``: the first release of each behaviour, the runners, the aux-id rule, the capture
family, the EAGLE 3.1 switch readers, and the rules as functions of what a release answers). The
rest of patcher asks these instead of comparing an engine's name (tests/test_engine_modules.py holds
the contract). Adding a third engine is one new module here (``ALL`` finds it), with its patches
(CONTRIBUTING.md; tests/test_third_engine.py adds two toy ones, one with the required members only,
and changes nothing else). Imports only ``errors``, ``findings`` and ``program`` of patcher (and
``packaging``): ``apply`` and ``verify`` import it, so it touches no network and no engine.

May import: errors, findings, program.
"""

from __future__ import annotations

import importlib
import pkgutil

from patcher.engine_specs.base import DrafterReading, EngineSpec, LaunchReading

# Modules of this package that are not engines: the contract, and what the parser children share.
# An engine's parser child is a script (``<engine>/parser_child.py``) its interpreter runs.
_NOT_ENGINES = ("base", "parser_child_common", "loader_child_common")


def _discovered() -> tuple[EngineSpec, ...]:
    """Every engine module of this folder, in listing order: adding an engine is adding its module."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_ENGINES:
            continue
        found.append(importlib.import_module(f"{__name__}.{info.name}").SPEC)
    return tuple(sorted(found, key=lambda s: (s.order, s.name)))


ALL: tuple[EngineSpec, ...] = _discovered()  # this order is every listing's order
NAMES: tuple[str, ...] = tuple(s.name for s in ALL)
BY_NAME: dict[str, EngineSpec] = {s.name: s for s in ALL}
# The engines that have a capability, each with it, in ALL's order: what the shared code iterates
# where it needs every engine's launch reading or drafter reading (issue 59).
LAUNCH_READERS: tuple[tuple[EngineSpec, LaunchReading], ...] = tuple((s, s.launch) for s in ALL if s.launch)
DRAFTER_READERS: tuple[tuple[EngineSpec, DrafterReading], ...] = tuple((s, s.drafter) for s in ALL if s.drafter)


def spec(name: str) -> EngineSpec:
    return BY_NAME[name]


def names(name: str) -> tuple[str, str]:
    """(distribution, import package) of the engine ``name``, as its module states them; an engine
    patcher has no module for (the tests' toy engines) is both under its own name."""
    found = BY_NAME.get(name)
    return (found.distribution, found.package) if found else (name, name)
