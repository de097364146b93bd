"""``patcher drafter check|fix``: the only module here that prints.

Exit codes, findings and the ``--json`` objects (``patcher.drafter.check/1``,
``patcher.drafter.fix/1``) are documented once, in the README's "patcher drafter" section.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from packaging.version import InvalidVersion, Version

from ..errors import PatcherError
from .checkpoint import read_checkpoint, read_config
from .checks import check_drafter
from .configs import parse_drafter_config, parse_target_config
from .convert import plan_fix
from .errors import DrafterInputError
from .findings import HINT, LEVELS, PROBLEM, Finding, has_problem
from .fix import refuse_bad_out, write_fix
from .release import ENGINES, Release, from_version

Detect = Callable[[str | None, "str | None", "Path | None"], "Release | None"]

CHECK_SCHEMA = "patcher.drafter.check/1"
FIX_SCHEMA = "patcher.drafter.fix/1"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "drafter", help="check or convert an EAGLE-3 drafter checkpoint for an engine release",
        description="Read a drafter's config and safetensors headers (never its tensors) and say how "
                    "the engine release will read it; or write a converted copy it reads as trained.")
    sub = parser.add_subparsers(dest="drafter_command", metavar="{check,fix}")
    sub.required = True

    check = sub.add_parser("check", help="report how an engine release would read the drafter",
                           description="Exit 0: nothing wrong; 1: a problem found (with --strict also: no engine "
                                       "found or named); 2: unreadable input or bad usage.")
    check.add_argument("drafter", type=Path, help="drafter folder (config.json + *.safetensors)")
    check.add_argument("--target", type=Path, help="target model folder (its config.json is read)")
    _engine_args(check)
    check.add_argument("--flags", metavar='"FLAGS"',
                       help='the server launch flags as one string; write --flags="--speculative-algorithm EAGLE3 ..." '
                            "(with '=') so they are not taken for options of this command")
    check.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    check.add_argument("--strict", action="store_true",
                       help="exit 1 when no engine was found or named: the engine-specific checks are then only "
                            "hints, not a pass (default: off; a warning on stderr either way)")

    fix = sub.add_parser("fix", help="write a copy with the key names and config the engine release reads",
                         description="Never writes in place; --out must not exist. Tensor bytes are copied "
                                     "unchanged and verified by hash.")
    fix.add_argument("drafter", type=Path, help="drafter folder (config.json + *.safetensors)")
    fix.add_argument("--out", type=Path, required=True, help="new folder to create (must not exist)")
    fix.add_argument("--target", type=Path, help="target model folder (decides whether aux ids are the default)")
    _engine_args(fix)
    fix.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return parser


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=ENGINES, help="engine to check against (default: the one installed)")
    p.add_argument("--engine-version", metavar="V", help="engine release (overrides the installed one)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--python", metavar="PATH",
                       help="interpreter of the environment that runs the engine (default: this one)")
    where.add_argument("--site", type=Path, metavar="DIR",
                       help="site-packages directory holding the engine, without an interpreter")


def run(args: argparse.Namespace, *, out: TextIO, err: TextIO, detect: Detect) -> int:
    schema = CHECK_SCHEMA if args.drafter_command == "check" else FIX_SCHEMA
    try:
        engine = resolve_engine(args.engine, args.engine_version, detect, args.python, args.site)
        if args.drafter_command == "check":
            return _check(args, engine, out, err)
        return _fix(args, engine, out, err)
    except PatcherError as exc:
        for line in exc.lines():
            print(line, file=err)
        if args.json:
            error = {"what": exc.what, "wanted": exc.wanted, "found": exc.found, "hint": exc.hint}
            print(json.dumps({"schema": schema, "error": error, "exit": exc.exit_code}, indent=2), file=out)
        return exc.exit_code


def resolve_engine(name: str | None, version: str | None, detect: Detect,
                   python: str | None = None, site: Path | None = None) -> Release | None:
    explicit = python is not None or site is not None
    try:
        detected = detect(name, python, site)
    except PatcherError:
        if version is None or explicit:
            raise
        # A broken install here must not block checking against a release named explicitly.
        detected = None
    if detected is not None and name is not None and detected.name != name:
        detected = None  # the caller's detector answered for another engine
    if version is None:
        if detected is not None:
            return detected
        return from_version(name, None) if name is not None else None
    try:
        wanted = Version(version)
    except InvalidVersion:
        raise DrafterInputError("--engine-version is not a version", wanted="e.g. 0.5.11 or 0.10.1.1",
                                found=repr(version)) from None
    engine = name or (detected.name if detected is not None else None)
    if engine is None:
        raise DrafterInputError("--engine-version needs --engine", wanted="--engine vllm|sglang",
                                found="no engine named and none installed")
    # The installed family states say nothing about another release than the installed one.
    if detected is not None and detected.name == engine and detected.version == wanted:
        return replace(detected, source="installed+flags")
    return from_version(engine, wanted)


def _engine_json(engine: Release | None) -> dict | None:
    if engine is None:
        return None
    return {"name": engine.name, "version": str(engine.version) if engine.version else None,
            "source": engine.source, "site": str(engine.site) if engine.site else None, "python": engine.python,
            "families": {f.family.id: f.state for f in engine.families}}


def _check(args: argparse.Namespace, engine: Release | None, out: TextIO, err: TextIO) -> int:
    ckpt = read_checkpoint(args.drafter)
    drafter = parse_drafter_config(ckpt.config, ckpt.folder / "config.json")
    target = None
    if args.target is not None:
        target = parse_target_config(read_config(args.target), args.target / "config.json")
    findings = check_drafter(ckpt, drafter, target, engine, args.flags)
    code = 1 if has_problem(findings) else 0
    if engine is None:  # exit 0 here must not read as a pass in CI (JSON: "engine": null says it)
        if not args.json:
            print("warning: no engine found or named: the engine-specific checks are hints, not a pass; name the "
                  "release (--engine E --engine-version V, or --python / --site), or add --strict to exit 1 here",
                  file=err)
        code = 1 if args.strict else code
    if args.json:
        counts = {level: sum(f.level == level for f in findings) for level in LEVELS}
        print(json.dumps({
            "schema": CHECK_SCHEMA, "drafter": str(ckpt.folder.absolute()),
            "target": str(args.target.absolute()) if args.target else None,
            "engine": _engine_json(engine), "findings": [f.to_json() for f in findings],
            "counts": counts, "exit": code}, indent=2), file=out)
        return code
    fmt = "speculators" if drafter.format == "speculators" else ", ".join(drafter.architectures) or "no architecture"
    print(f"drafter: {ckpt.folder} ({fmt}; {len(ckpt.tensors)} tensors in {len(ckpt.files)} file(s))", file=out)
    if target is not None:
        print(f"target:  {args.target} ({target.model_type}/{target.text_model_type}, "
              f"{target.num_hidden_layers} layers, hidden {target.hidden_size}, vocab {target.vocab_size})", file=out)
    if engine is None:
        print("engine:  none installed or named (engine-specific checks are hints)", file=out)
    else:
        where = f" at {engine.site}" if engine.site else ""
        print(f"engine:  {engine.label()} ({engine.source}{where})", file=out)
    for f in findings:
        _print_finding(f, out)
    n_problem = sum(f.level == PROBLEM for f in findings)
    n_hint = sum(f.level == "hint" for f in findings)
    print(f"result:  {n_problem} problem(s), {n_hint} hint(s), {len(findings) - n_problem - n_hint} ok", file=out)
    return code


def _print_finding(f: Finding, out: TextIO) -> None:
    label = f.level.upper() if f.level == PROBLEM else f.level
    print(f"  {label:8} {f.code}: {f.message}", file=out)
    for name, text in (("wanted", f.wanted), ("found", f.found), ("hint", f.hint)):
        if text and (f.level != "ok"):
            print(f"           {name + ':':8}{text}", file=out)


def _fix(args: argparse.Namespace, engine: Release | None, out: TextIO, err: TextIO) -> int:
    if engine is None:
        raise DrafterInputError("fix needs to know the engine", wanted="--engine vllm|sglang --engine-version V",
                                found="no engine named and none installed")
    ckpt = read_checkpoint(args.drafter)
    drafter = parse_drafter_config(ckpt.config, ckpt.folder / "config.json")
    target = None
    if args.target is not None:
        target = parse_target_config(read_config(args.target), args.target / "config.json")
    refuse_bad_out(ckpt, args.out)  # a usage error, whether or not there is anything to write
    before = check_drafter(ckpt, drafter, target, engine, None)
    plan = plan_fix(ckpt, drafter, engine, target)
    if not plan.needed:
        return _nothing_to_fix(args, ckpt.folder, engine, plan, before, out)
    result = write_fix(ckpt, plan, args.out, progress=None if args.json else _progress(err))
    # Check what was written, as the engine will read it; what the rewrite could not mend stays a problem.
    written = read_checkpoint(result.out)
    after = check_drafter(written, parse_drafter_config(written.config, written.folder / "config.json"),
                          target, engine, None)
    remaining = still_wrong(before, after)
    code = 1 if remaining else 0
    if args.json:
        renamed = ({"from": plan.rename_from, "to": plan.rename_to, "count": plan.renamed}
                   if plan.rename_from else None)
        print(json.dumps({
            "schema": FIX_SCHEMA, "drafter": str(ckpt.folder.absolute()), "out": str(result.out.absolute()),
            "engine": _engine_json(engine), "renamed": renamed, "config_rewritten": plan.config_rewritten,
            "notes": list(plan.notes), "files": list(result.files),
            "tensors_verified": result.tensors_verified, "bytes_verified": result.bytes_verified,
            "problems": [f.to_json() for f in remaining], "exit": code}, indent=2), file=out)
        return code
    print(f"wrote {result.out} for {engine.label()}", file=out)
    for note in plan.notes:
        print(f"  {note}", file=out)
    print(f"  {result.tensors_verified} tensors ({result.bytes_verified} bytes) verified identical by sha256",
          file=out)
    if remaining:
        print(f"the copy still has {len(remaining)} problem(s) {engine.label()} would run into:", file=out)
        for f in remaining:
            _print_finding(f, out)
        print(f"result:  copy kept at {result.out}; {len(remaining)} problem(s) remain", file=out)
    return code


def _nothing_to_fix(args: argparse.Namespace, folder: Path, engine: Release, plan, before: list[Finding],
                    out: TextIO) -> int:
    """No rename and no config change would help: say so, write nothing, and list the problems
    that remain (those are not the checkpoint's: e.g. families still to apply)."""
    remaining = [f for f in before if f.level == PROBLEM]
    code = 1 if remaining else 0
    if args.json:
        print(json.dumps({
            "schema": FIX_SCHEMA, "drafter": str(folder.absolute()), "out": None, "engine": _engine_json(engine),
            "renamed": None, "config_rewritten": False, "notes": list(plan.notes), "files": [],
            "tensors_verified": 0, "bytes_verified": 0, "problems": [f.to_json() for f in remaining],
            "exit": code}, indent=2), file=out)
        return code
    for note in plan.notes:
        print(note, file=out)
    if remaining:
        print(f"{len(remaining)} problem(s) remain that no copy of the drafter can mend:", file=out)
        for f in remaining:
            _print_finding(f, out)
    return code


PROGRESS_FROM = 1 << 30  # copies smaller than this finish before a progress line would help


def _progress(err: TextIO) -> Callable[[str, int, int], None]:
    """Progress lines on stderr for large copies: one per tenth of the bytes, per phase."""
    shown: dict[str, int] = {}

    def report(phase: str, done: int, total: int) -> None:
        if total < PROGRESS_FROM:
            return
        tenth = done * 10 // total
        if shown.get(phase, -1) < tenth:
            shown[phase] = tenth
            print(f"  {phase}: {done / 1e9:.1f} / {total / 1e9:.1f} GB", file=err, flush=True)
    return report


def still_wrong(before: list[Finding], after: list[Finding]) -> list[Finding]:
    """Problems of the written copy. A finding that was a problem before the rewrite and only
    reads as a hint after it stays a problem: renaming keys or rewriting config.json changes
    how a fact is described, never whether the engine runs the drafter as trained."""
    was_problem = {f.code for f in before if f.level == PROBLEM}
    return [f if f.level == PROBLEM else replace(f, level=PROBLEM)
            for f in after if f.level == PROBLEM or (f.level == HINT and f.code in was_problem)]
