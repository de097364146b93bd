"""What an engine release does with a whole launch command, read from its files as its engine
module says where: which targets draft with their own MTP layers, which *_mtp methods it names, and
which console commands it installs. Generic over the engine (``EngineSpec.launch`` names the files);
what only one engine does lives in its module (``patcher.engine_specs.<engine>``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from patcher.engine_specs.base import EngineSpec, parse_file


def mtp_target_architectures(spec: EngineSpec, site: Path | None) -> frozenset[str] | None:
    """The target architectures whose own MTP layers the release loads as the draft model, read
    where the engine module says (its MTP model file and the targets it serves; the
    ``if model_arch in [...]`` lists under which the release sets the draft model to the target);
    None: not read (no install, or the release's code moved)."""
    if site is None:
        return None
    launch = spec.launch
    found: set[str] = set()
    if launch.mtp_model is not None and (site / launch.mtp_model[0]).is_file():
        found |= set(launch.mtp_model[1])
    for rel in launch.mtp_arch_lists:
        base = site / rel
        for path in sorted(base.glob("*.py")) if base.is_dir() else [base]:
            tree = parse_file(path)
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.If) and _draft_is_the_target(node):
                    found |= _listed(node.test)
    return frozenset(found) or None


def _draft_is_the_target(node: ast.If) -> bool:
    """``if model_arch in [...]: if ...draft_model_path is None: <draft path> = <the model path>``."""
    text = ast.unparse(ast.Module(body=node.body, type_ignores=[]))
    return "speculative_draft_model_path" in text and re.search(
        r"speculative_draft_model_path\s*=\s*\w+\.model_path", text) is not None


def _listed(test: ast.expr) -> set[str]:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In) \
            and isinstance(test.left, ast.Name) and test.left.id.endswith("arch") \
            and isinstance(test.comparators[0], (ast.List, ast.Tuple, ast.Set)):
        return {e.value for e in test.comparators[0].elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def mtp_methods(spec: EngineSpec, site: Path | None) -> frozenset[str]:
    """The *_mtp methods the release's Literal types name (vLLM's MTPModelTypes, or SpeculativeMethod
    before it existed), and "mtp" itself where named."""
    out: set[str] = set()
    for rel in spec.launch.mtp_declarations:
        tree = parse_file(site / rel) if site is not None else None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id in ("MTPModelTypes", "SpeculativeMethod") for t in targets):
                    out |= {c.value for c in ast.walk(node.value or node) if isinstance(c, ast.Constant)
                            and isinstance(c.value, str) and (c.value == "mtp" or c.value.endswith("_mtp"))}
    return frozenset(out)



def console_scripts(dist_info: Path) -> frozenset[str] | None:
    """The console commands a release installs, as its ``entry_points.txt`` declares them (SGLang
    declares ``sglang`` from 0.5.5: none before, and no such file); None where that cannot be read."""
    import configparser

    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    try:
        parser.read_string((dist_info / "entry_points.txt").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return frozenset() if (dist_info / "METADATA").is_file() else None  # a wheel that declares none
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    return frozenset(parser["console_scripts"]) if parser.has_section("console_scripts") else frozenset()
