"""How the code is laid out, read from the code (issue 35): import levels, imports that go back
up, and the walk of two real commands through the modules.

    python benchmarks/code_walk.py [--engine vllm --version 0.34.0]

* **Level** of a module: 0 when it imports nothing of ``patcher``; else one more than the highest
  level it imports (at its top, or lazily inside a function). A lazy import that closes a cycle
  (the imported module already reaches the importer) has no level to go down to: it is an import
  **back up** the order (``upward``), and is left out of the levels.
* **Walk** of a command: every call from one ``patcher`` module into another while ``main`` runs
  (``sys.setprofile``; every module imported first: an import is not a step), in-process, on a
  copy of the published tree. *Modules entered* are the
  modules with a function called; a *trip back up* is a call whose callee sits at a higher level
  than its caller (a lower module calling back into one above it).

The two commands: ``patcher apply --engine E --site S --no-probes`` on the published tree, then
``patcher doctor --site S -- vllm serve <Kimi-K2.5> --speculative-config <SpecForge drafter>``
on the applied tree (the drafter and target are the tests' real-tool layouts).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import io
import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PACKAGE = ROOT / "patcher"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom | ast.Import, known: set[str]) -> set[str]:
    """The patcher modules one import statement loads (a name imported from a package counts as
    its module when there is one)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in known}
    base = node.module or ""
    if node.level:
        anchor = importer.split(".")
        anchor = anchor if is_package else anchor[:-1]
        anchor = anchor[:len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, *([base] if base else [])])
    found = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in known:
            found.add(f"{base}.{alias.name}")
        elif base in known:
            found.add(base)
    return found


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, int]]:
    """(top-level imports, lazy imports, lines) per module of patcher (cpu_envs excluded: it is a
    file copied into engine environments, not part of the installer)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py") if "cpu_envs" not in p.parts}
    known = set(files)
    top: dict[str, set[str]] = {m: set() for m in files}
    lazy: dict[str, set[str]] = {m: set() for m in files}
    lines = {}
    for module, path in files.items():
        source = path.read_text()
        lines[module] = source.count("\n")
        tree = ast.parse(source)
        at_top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = _resolve(module, path.name == "__init__.py", node, known) - {module}
                (top if id(node) in at_top else lazy)[module] |= targets
    return top, lazy, lines


def layered(top: dict[str, set[str]], lazy: dict[str, set[str]]) -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """(the imports that go down, the lazy imports that close a cycle: back up the order)."""
    edges = {m: set(ds) for m, ds in top.items()}

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            m = todo.pop()
            if m == b:
                return True
            if m not in seen:
                seen.add(m)
                todo.extend(edges[m])
        return False

    up = []
    for importer, d in sorted((m, d) for m, ds in lazy.items() for d in ds - top[m]):
        if reaches(d, importer):
            up.append((importer, d))
        else:
            edges[importer].add(d)
    return edges, up


def levels(top: dict[str, set[str]]) -> dict[str, int]:
    memo: dict[str, int] = {}

    def level(m: str, seen: tuple[str, ...] = ()) -> int:
        if m not in memo:
            if m in seen:
                raise ValueError(f"import cycle at top level: {' -> '.join((*seen, m))}")
            memo[m] = 1 + max((level(d, (*seen, m)) for d in top[m]), default=-1)
        return memo[m]

    for m in top:
        level(m)
    return memo


def walk(argv: list[str], level: dict[str, int]) -> tuple[list[str], list[tuple[str, str]]]:
    """(modules entered in order, calls back up) while patcher's main runs argv."""
    from patcher.cli.main import main

    entered: dict[str, None] = {}
    ups: list[tuple[str, str]] = []

    def owner(frame) -> str | None:
        name = frame.f_globals.get("__name__", "")
        return name if name in level else None

    def profile(frame, event, _arg):
        if event != "call":
            return
        callee = owner(frame)
        if callee is None:
            return
        entered.setdefault(callee)
        back = frame.f_back
        while back is not None and owner(back) is None:
            back = back.f_back
        caller = owner(back) if back is not None else None
        if caller and caller != callee and level[callee] > level[caller]:
            ups.append((caller, callee))

    for module in level:  # what runs on import is not a step of the command
        if not module.endswith(("parser_child", "loader_child")):  # scripts a release's interpreter runs
            importlib.import_module(module)
    sys.setprofile(profile)
    try:
        main(argv, out=io.StringIO(), err=io.StringIO())
    finally:
        sys.setprofile(None)
    return list(entered), ups


def _commands(work: Path, engine: str, version: str) -> dict[str, list[str]]:
    from patcher.maintainer import wheels
    from tests.support.real_drafters import kimi_target, specforge_kimi

    site = work / "site"
    shutil.copytree(wheels.tree(engine, version), site)
    spec = json.dumps({"method": "eagle3", "model": str(specforge_kimi(work)), "num_speculative_tokens": 3})
    return {"apply": ["apply", "--engine", engine, "--site", str(site), "--no-probes"],
            "doctor": ["doctor", "--site", str(site), "--", "vllm", "serve", str(kimi_target(work)),
                       "--speculative-config", spec, "-tp", "8"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--version", default="0.34.0")
    args = ap.parse_args(argv)
    top, lazy, lines = import_graph()
    edges, ups = layered(top, lazy)
    level = levels(edges)
    folders = {m.rsplit(".", 1)[0] for m in level if m.count(".") > 1} | {"patcher"}
    print(f"layout: {len(level)} modules in {len(folders)} folders, {sum(lines.values())} lines, "
          f"{1 + max(level.values())} import levels; over 300 lines: "
          + ", ".join(f"{m} {n}" for m, n in sorted(lines.items(), key=lambda kv: -kv[1]) if n > 300))
    per = Counter(level.values())
    print("modules per level: " + ", ".join(f"{lv}: {per[lv]}" for lv in sorted(per)))
    print(f"imports back up the order: {len(ups)}" + "".join(f"\n  {m} -> {d}" for m, d in ups))
    with tempfile.TemporaryDirectory() as tmp:
        for name, command in _commands(Path(tmp), args.engine, args.version).items():
            entered, trips = walk(command, level)
            print(f"walk of {name} ({args.engine} {args.version}): {len(entered)} modules entered, "
                  f"{len(trips)} trips back up ({len(set(trips))} distinct)")
            print("  entered: " + " ".join(f"{m.removeprefix('patcher.')}[{level[m]}]" for m in entered))
            for (caller, callee), n in Counter(trips).most_common():
                print(f"  up x{n}: {caller}[{level[caller]}] -> {callee}[{level[callee]}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
