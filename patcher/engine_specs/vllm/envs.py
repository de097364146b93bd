"""The environment variables doctor reads on vLLM, as a release's ``vllm/envs.py`` declares them:
its ``environment_variables`` dict of ``"NAME": lambda: os.getenv("NAME", default)`` entries, read
from the syntax tree and run (the lambda, with the module's own helper functions) on the value."""

from __future__ import annotations

import ast
from pathlib import Path

from patcher.engine_specs.base import EnvParsed, EnvRules, EnvVar, compares_to, definitions, parse_file

ENVS_FILE = "vllm/envs.py"
V2_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"  # which model runner (patcher.engine_specs.vllm.runners)
FLASHINFER_ALLREDUCE_ENV = "VLLM_ALLREDUCE_USE_FLASHINFER"  # the FlashInfer allreduce fusion's backend
NAMES = (V2_RUNNER_ENV, FLASHINFER_ALLREDUCE_ENV)


PLATFORM_FILE = "vllm/platforms/interface.py"


def read(site: Path) -> dict[str, EnvVar]:
    declared = getenv_defaults(site / ENVS_FILE)
    out = {name: EnvVar(name, name in declared, declared.get(name)) for name in NAMES}
    if V2_RUNNER_ENV not in declared and v2_env_refused(site):
        out[V2_RUNNER_ENV] = EnvVar(V2_RUNNER_ENV, True, None, only="1")  # read by the platform's start-up check
    return out


def v2_env_refused(site: Path | None) -> bool:
    """Whether start-up refuses VLLM_USE_V2_MODEL_RUNNER set to anything but "1" (0.34.0:
    ``if env == "VLLM_USE_V2_MODEL_RUNNER": if value != "1": raise``), read from the syntax tree."""
    tree = parse_file(site / PLATFORM_FILE) if site is not None else None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.If) and compares_to(node.test, V2_RUNNER_ENV, ast.Eq):
            for inner in (n for stmt in node.body for n in ast.walk(stmt)):
                if isinstance(inner, ast.If) and compares_to(inner.test, "1", ast.NotEq) \
                        and any(isinstance(n, ast.Raise) for stmt in inner.body for n in ast.walk(stmt)):
                    return True
    return False


def getenv_defaults(path: Path) -> dict[str, str | None]:
    """``{"NAME": default}`` for every entry of envs.py's ``environment_variables`` dict whose
    value reads ``os.getenv("NAME", default)`` / ``os.environ.get(...)``."""
    tree = parse_file(path)
    if tree is None:
        return {}
    out: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.isupper()):
                continue
            for call in ast.walk(value):
                if isinstance(call, ast.Call) and _is_getenv(call.func) and call.args \
                        and isinstance(call.args[0], ast.Constant) and call.args[0].value == key.value:
                    default = call.args[1] if len(call.args) > 1 else None
                    out[key.value] = (str(default.value) if isinstance(default, ast.Constant)
                                      and default.value is not None else None)
                    break
    return out


def _is_getenv(func: ast.expr) -> bool:
    # os.getenv(...) or os.environ.get(...)
    if isinstance(func, ast.Attribute) and func.attr == "getenv":
        return True
    return (isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Attribute)
            and func.value.attr == "environ")


def parse(site: Path, name: str, env: dict[str, str]) -> EnvParsed | None:
    """The envs.py entry's lambda run on ``env[name]``: a ValueError or TypeError stops start-up."""
    tree = parse_file(site / ENVS_FILE)
    if tree is None:
        return None
    ns = definitions(tree, env)
    entry = _dict_entry(tree, name)
    if entry is None or ns is None:
        return None
    how = f"{ENVS_FILE} reads it as {ast.unparse(entry)[len('lambda: '):][:80]}"
    try:
        eval(compile(ast.Expression(entry), str(site / ENVS_FILE), "eval"), ns)()
    except (ValueError, TypeError) as exc:
        return EnvParsed(how, "0 or 1", raises=f"{type(exc).__name__}: {exc}")
    except Exception:
        return None
    return EnvParsed(how, "0 or 1")


def _dict_entry(tree: ast.Module, name: str) -> ast.Lambda | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == name and isinstance(value, ast.Lambda):
                    return value
    return None


def env_true(value: str | None) -> bool:
    """vLLM reads these as ``bool(int(value))``."""
    try:
        return bool(int(value)) if value is not None else False
    except ValueError:
        return False


RULES = EnvRules(names=NAMES, read=read, parse=parse)
