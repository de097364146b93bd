"""``patcher drafter check|fix``: the arguments, and the printed reports (the only module here that
prints). Errors are raised; ``patcher.__main__`` prints them, as for every command.

Exit codes, findings and the ``--json`` objects (``patcher.drafter.check/1``,
``patcher.drafter.fix/1``) are documented once, in docs/reference.md, section "patcher drafter".
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ..manifest import ENGINES
from .checkpoint import read_checkpoint, read_config
from .checks import check_drafter
from .configs import parse_drafter_config, parse_target_config
from .findings import LEVELS, PROBLEM, UNKNOWN, Finding, has_problem, tally
from .fix import fix_drafter
from .locate import Detect, resolve_engine
from .release import Release

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
    """Run ``drafter check|fix``; a PatcherError goes up to ``patcher.__main__``, which prints it."""
    engine = resolve_engine(args.engine, args.engine_version, detect, args.python, args.site)
    if args.drafter_command == "check":
        return _check(args, engine, out, err)
    return _fix(args, engine, out, err)


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
        print_finding(f, out)
    print(f"result:  {tally(findings)}", file=out)
    return code


def print_finding(f: Finding, out: TextIO) -> None:
    label = f.level.upper() if f.level in (PROBLEM, UNKNOWN) else f.level
    print(f"  {label:8} {f.code}: {f.message}", file=out)
    for name, text in (("wanted", f.wanted), ("found", f.found), ("hint", f.hint)):
        if text and (f.level != "ok"):
            print(f"           {name + ':':8}{text}", file=out)


def _fix(args: argparse.Namespace, engine: Release | None, out: TextIO, err: TextIO) -> int:
    done = fix_drafter(args.drafter, args.out, args.target, engine, progress=None if args.json else _progress(err))
    plan, result, remaining = done.plan, done.written, done.remaining
    assert engine is not None  # fix_drafter refuses to run without one
    code = 1 if remaining else 0
    if args.json:
        renamed = ({"from": plan.rename_from, "to": plan.rename_to, "count": plan.renamed}
                   if plan.rename_from else None)
        print(json.dumps({
            "schema": FIX_SCHEMA, "drafter": str(done.source.folder.absolute()),
            "out": str(result.out.absolute()) if result else None,
            "engine": _engine_json(engine), "renamed": renamed, "config_rewritten": plan.config_rewritten,
            "notes": list(plan.notes), "files": list(result.files) if result else [],
            "tensors_verified": result.tensors_verified if result else 0,
            "bytes_verified": result.bytes_verified if result else 0,
            "problems": [f.to_json() for f in remaining], "exit": code}, indent=2), file=out)
        return code
    if result is None:  # nothing to fix: say so, and list the problems no copy can mend
        for note in plan.notes:
            print(note, file=out)
        if remaining:
            print(f"{len(remaining)} problem(s) remain that no copy of the drafter can mend:", file=out)
            for f in remaining:
                print_finding(f, out)
        return code
    print(f"wrote {result.out} for {engine.label()}", file=out)
    for note in plan.notes:
        print(f"  {note}", file=out)
    print(f"  {result.tensors_verified} tensors ({result.bytes_verified} bytes) verified identical by sha256",
          file=out)
    if remaining:
        print(f"the copy still has {len(remaining)} problem(s) {engine.label()} would run into:", file=out)
        for f in remaining:
            print_finding(f, out)
        print(f"result:  copy kept at {result.out}; {len(remaining)} problem(s) remain", file=out)
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
