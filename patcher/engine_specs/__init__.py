"""One module per engine: everything that differs between the engines, said once.

Each engine is one module here (``vllm.py``, ``sglang.py``) holding one ``EngineSpec``
(``description.py``): its name, title, distribution and import package, the first release we cover, the CPU
import-env lines and how a release enters one, how its server is launched and parses options
(which option names the speculative method, which launch checks doctor runs), where it declares
its environment variables and which it reads, its registry, and how it reads an EAGLE-3 drafter
(``DrafterReading``: the first release of each behaviour, the aux-id rule, the capture family,
the EAGLE 3.1 switch readers, and three rules as functions of what a release answers). The rest
of patcher asks these instead of comparing an engine's name (tests/test_engine_modules.py holds
the contract). Adding a third engine is one new module here (``ALL`` finds it), with its patches
and tests (CONTRIBUTING.md; tests/test_third_engine.py adds a toy one and changes nothing else).
Imports nothing of patcher: ``apply`` and ``verify`` import it, so it touches no network and no
engine.

May import: nothing of patcher.
"""

from __future__ import annotations

import importlib
import pkgutil

from patcher.engine_specs.description import EngineSpec

# Modules of this package that are not engines: the contract, and what the parser children share.
# An engine's parser child is a script (``<engine>_parser_child.py``) its interpreter runs.
_NOT_ENGINES = ("description", "parser_child_common")


def _discovered() -> tuple[EngineSpec, ...]:
    """Every engine module of this folder, in listing order: adding an engine is adding its module."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_ENGINES or info.name.endswith("_parser_child"):
            continue
        found.append(importlib.import_module(f"{__name__}.{info.name}").SPEC)
    return tuple(sorted(found, key=lambda s: (s.order, s.name)))


ALL: tuple[EngineSpec, ...] = _discovered()  # this order is every listing's order
NAMES: tuple[str, ...] = tuple(s.name for s in ALL)
BY_NAME: dict[str, EngineSpec] = {s.name: s for s in ALL}


def spec(name: str) -> EngineSpec:
    return BY_NAME[name]
