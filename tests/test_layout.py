"""The house by its jobs (issue 35): one folder per job, each importing only the folders its
``__init__`` names on its "May import:" line, and only the command line printing.

Read from the source with ``ast``: every import, at a module's top or inside a function (a lazy
import still runs). The order of the folders is the one ``patcher/__init__.py`` lists.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "patcher"
# What a module at the top of patcher/ is (not a folder): its one job, and what it may import.
TOP_MODULES = {"errors": set(), "findings": set(), "program": set(), "__main__": {"cli"}, "__init__": set()}


def folders() -> dict[str, set[str]]:
    """Each folder of patcher/ and the folders (or top modules) its __init__ says it may import."""
    out = {}
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        line = re.search(r"^May import: (.+?)\.$", doc, re.M | re.S)  # may wrap onto a second line
        assert line, f"{init.relative_to(PACKAGE.parent)}: no 'May import: ...' line in its docstring"
        names = " ".join(line.group(1).split())
        out[init.parent.name] = set() if names == "nothing of patcher" else set(names.split(", "))
    return out


def owner(path: Path) -> str:
    """The folder (or top module) a file belongs to."""
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, the folder or top module of patcher) for every patcher import in the file."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from patcher import x``: x is a folder or top module (``__version__`` is neither)
            mods = [node.module] if node.module != "patcher" else [
                f"patcher.{a.name}" for a in node.names
                if (PACKAGE / a.name).is_dir() or (PACKAGE / f"{a.name}.py").is_file()]
        elif isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        else:
            continue
        found += [(node.lineno, m.split(".")[1]) for m in mods if m.startswith("patcher.")]
    return found


def sources() -> list[Path]:
    # cpu_envs/ holds files copied into engine environments, not modules of the installer
    return sorted(p for p in PACKAGE.rglob("*.py") if "cpu_envs" not in p.parts)


def test_every_folder_states_its_job_and_what_it_may_import():
    listed = re.findall(r"^- ``(\w+)/``", ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text())), re.M)
    assert listed == [f for f in listed if f in folders()] and set(listed) == set(folders())


def test_every_import_goes_down_the_order():
    allowed = folders() | TOP_MODULES
    wrong = []
    for path in sources():
        mine = owner(path)
        for line, theirs in imported(path):
            if theirs != mine and theirs not in allowed[mine]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {mine} imports {theirs}")
    assert not wrong, "\n".join(wrong)


def test_the_may_import_lines_follow_the_listed_order():
    """A folder may import only folders listed before it: the order has no cycle."""
    listed = re.findall(r"^- ``(\w+)/``", PACKAGE.joinpath("__init__.py").read_text(), re.M)
    order = ["errors", "findings", "program", *listed]
    for folder, allowed in folders().items():
        above = set(order[order.index(folder):])
        assert not allowed & above, f"{folder} may import {allowed & above}, listed at or after it"


def test_relative_imports_are_only_within_a_folder():
    """Imports between folders are absolute, so a move shows in the text (and this test sees it)."""
    wrong = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 1:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not wrong, wrong


def _prints(path: Path) -> list[int]:
    """Lines that print or write to the process's own stdout/stderr, outside the ``main`` of a
    module run as ``python -m`` (its own small command line: ``patcher.core.matrix``)."""
    tree = ast.parse(path.read_text())
    own_main = {id(n) for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "main"
                for n in ast.walk(f)} if "__name__ == \"__main__\"" in path.read_text() else set()
    lines = []
    for node in ast.walk(tree):
        if id(node) in own_main:
            continue
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "print":
                lines.append(node.lineno)
            elif (isinstance(f, ast.Attribute) and f.attr == "write" and isinstance(f.value, ast.Attribute)
                  and isinstance(f.value.value, ast.Name) and f.value.value.id == "sys"):
                lines.append(node.lineno)
    return lines


# Scripts that run as programs of their own, in the engine's interpreter: the probe child, the
# introspection script and each engine's parser and loader children (maintainer/ holds the maintainer's
# own command-line tools).
OWN_PROGRAMS = {"probes/probe_child.py", "environment/_introspect.py", "engine_specs/vllm/parser_child.py",
                "engine_specs/sglang/parser_child.py", "engine_specs/parser_child_common.py",
                "engine_specs/vllm/loader_child.py", "engine_specs/sglang/loader_child.py",
                "engine_specs/loader_child_common.py"}


@pytest.mark.parametrize("path", [p for p in sources() if owner(p) not in ("cli", "maintainer")
                                  and str(p.relative_to(PACKAGE)) not in OWN_PROGRAMS],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_command_line_prints(path: Path):
    assert _prints(path) == [], f"{path.relative_to(PACKAGE.parent)} prints: return a report instead"


LONG = 300  # lines; a module past it says why at the end of its docstring


def test_a_module_over_300_lines_says_why():
    unexplained = []
    for path in sources():
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        if text.count("\n") > LONG and not re.search(rf"^Over {LONG} lines: \S", doc, re.M):
            unexplained.append(f"{path.relative_to(PACKAGE.parent)}: {text.count(chr(10))} lines")
    assert not unexplained, "split these, or say why at the end of the docstring:\n" + "\n".join(unexplained)


def test_the_wheel_holds_every_module_family_file_and_cpu_env_lock(tmp_path):
    """The wheel (what the Docker build and a user's ``pip install`` get) holds every module of patcher/,
    every file of each patch family and each engine's CPU env locks. setup.py finds the packages and the
    package data names files by pattern, so a new engine is in the wheel with no line added anywhere
    (issue 59). Built by pip from a copy: setuptools writes build/ and *.egg-info beside the sources."""
    import shutil
    import subprocess
    import sys
    import zipfile

    from patcher import engine_specs

    root, src = PACKAGE.parent, tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("patcher", "patches"):
        shutil.copytree(root / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copyfile(root / name, src / name)
    got = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(src)],
                         capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-3000:]
    (wheel,) = tmp_path.glob("kimi_patcher-*.whl")
    held = set(zipfile.ZipFile(wheel).namelist())
    want = {p.relative_to(root).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    want |= {f"patcher/{p.relative_to(root).as_posix()}" for p in (root / "patches").glob("*/*/*") if p.is_file()}
    want |= {line.lock.relative_to(root).as_posix() for s in engine_specs.ALL for line in s.cpu_env_lines}
    assert any("/cpu_envs/" in w for w in want) and any(w.endswith(".diff") for w in want)  # the globs found them
    assert not want - held, sorted(want - held)


def test_every_command_a_line_names_is_made_with_the_programs_name():
    """Issue 59: a line that names a command ('patcher apply', 'patcher verify --json') is made with
    ``program.command``, which names the program as the user started it (``python -m patcher``);
    nothing rewrites the output afterwards. A string in code naming one by hand is caught here;
    docstrings and comments are prose."""
    said = re.compile(r"(?<![\w./-])patcher (?:apply|verify|revert|doctor|drafter|list|port)\b")
    found = []
    for path in sources():
        tree = ast.parse(path.read_text())
        prose = {id(node.body[0].value) for node in ast.walk(tree)
                 if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        found += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
                  and said.search(node.value)]
    assert not found, "\n".join(found)
