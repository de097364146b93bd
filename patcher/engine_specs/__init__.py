"""One module per engine: everything that differs between the engines, said once.

Each engine is one module here (``vllm.py``, ``sglang.py``) holding one ``EngineSpec``
(``description.py``): its distribution name and title, the first release we cover, the CPU
import-env lines and how a release enters one, how its server is launched and parses options
(which option names the speculative method, which launch checks doctor runs), where it declares
its environment variables and which it reads, its registry, and how it reads an EAGLE-3 drafter
(``DrafterReading``: the first release of each behaviour, the aux-id rule, the capture family,
the EAGLE 3.1 switch readers, and three rules as functions of what a release answers). The rest
of patcher asks these instead of comparing an engine's name (tests/test_engine_modules.py holds
the contract). Adding a third engine is one new module and its name in ``ALL``, with its patches
and tests (CONTRIBUTING.md). Imports nothing of patcher: ``apply`` and ``verify`` import it, so
it touches no network and no engine.

May import: nothing of patcher.
"""

from __future__ import annotations

from patcher.engine_specs import sglang, vllm
from patcher.engine_specs.description import EngineSpec

ALL: tuple[EngineSpec, ...] = (vllm.SPEC, sglang.SPEC)  # this order is every listing's order
NAMES: tuple[str, ...] = tuple(s.name for s in ALL)
BY_NAME: dict[str, EngineSpec] = {s.name: s for s in ALL}


def spec(name: str) -> EngineSpec:
    return BY_NAME[name]
