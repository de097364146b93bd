"""The environment variables doctor reads on SGLang, as a release's ``sglang/srt/environ.py``
declares them: ``class Envs: NAME = EnvBool(default)``, read from the syntax tree, and a value run
through the EnvField class's own ``parse`` (a ValueError there is a warning and the default)."""

from __future__ import annotations

import ast
from pathlib import Path

from patcher.engine_specs.base import EnvParsed, EnvRules, EnvVar, definitions, parse_file

ENVIRON_FILE = "sglang/srt/environ.py"
# The speculative worker: EAGLEWorkerV2 (overlap scheduling) when on; declared in sglang/srt/environ.py
# from 0.5.4.post1, on by default from 0.5.11, removed in 0.5.14 (the V2 worker always runs).
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"
NAMES = (SPEC_V2_ENV,)


def read(site: Path) -> dict[str, EnvVar]:
    declared = environ_defaults(site / ENVIRON_FILE)
    return {name: EnvVar(name, name in declared, declared.get(name)) for name in NAMES}


def environ_defaults(path: Path) -> dict[str, str | None]:
    """``{"NAME": default}`` for SGLang's ``class Envs: NAME = EnvBool(default)`` declarations."""
    tree = parse_file(path)
    out: dict[str, str | None] = {}
    for cls in (n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == "Envs"):
        for node in cls.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Call) and node.targets[0].id.startswith("SGLANG_"):
                arg = node.value.args[0] if node.value.args else None
                out[node.targets[0].id] = str(arg.value) if isinstance(arg, ast.Constant) else None
    return out


def parse(site: Path, name: str, env: dict[str, str]) -> EnvParsed | None:
    tree = parse_file(site / ENVIRON_FILE)
    if tree is None:
        return None
    ns = definitions(tree, env)
    field = _envs_field(tree, name)
    if field is None or ns is None or field not in ns:
        return None
    how = f"{ENVIRON_FILE} declares it {field}"
    try:
        ns[field].parse(ns[field], env[name])
    except ValueError as exc:
        return EnvParsed(how, "a value its parse takes", ignored=str(exc))
    except Exception:
        return None
    return EnvParsed(how, "a value its parse takes")


def _envs_field(tree: ast.Module, name: str) -> str | None:
    """The EnvField class SGLang's ``class Envs`` declares ``name`` with (``EnvBool``...)."""
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Envs"):
        for node in cls.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                    and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
                return node.value.func.id
    return None


RULES = EnvRules(names=NAMES, read=read, parse=parse)
