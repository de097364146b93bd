"""One description per engine: plain data every part of patcher reads about an engine.

Each engine is one module here (``vllm.py``, ``sglang.py``) holding one ``EngineSpec``
(``description.py``): its distribution name, the first release we cover, the CPU import-env lines, how
its server is launched and parses options, where it declares its environment variables, and the
registry facts the drafter check reads. Adding a third engine is one new module and its name in
``ALL``. Plain data on purpose: ``apply`` and ``verify`` import it, so it imports no maintainer
code, nothing that touches the network, and no engine.

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
