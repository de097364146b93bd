"""``patcher drafter check|fix``: the arguments; the reports are rendered by ``patcher.cli.report``.
Errors are raised; ``patcher.cli.main`` prints them, as for every command.

Exit codes, findings and the ``--json`` objects (``patcher.drafter.check/1``,
``patcher.drafter.fix/1``) are documented once, in docs/reference.md, section "patcher drafter".
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from patcher.cli import report
from patcher.core.manifest import ENGINES
from patcher.drafter.checkpoint import read_checkpoint, read_config
from patcher.drafter.checks import check_drafter
from patcher.drafter.configs import parse_drafter_config, parse_target_config
from patcher.drafter.fix import fix_drafter
from patcher.drafter.locate import Detect, resolve_engine
from patcher.findings import has_problem
from patcher.release.release import Release

CHECK_SCHEMA, FIX_SCHEMA = report.CHECK_SCHEMA, report.FIX_SCHEMA


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
    """Run ``drafter check|fix``; a PatcherError goes up to ``patcher.cli.main``, which prints it."""
    engine = resolve_engine(args.engine, args.engine_version, detect, args.python, args.site)
    if args.drafter_command == "check":
        return _check(args, engine, out, err)
    return _fix(args, engine, out, err)


def _check(args: argparse.Namespace, release: Release | None, out: TextIO, err: TextIO) -> int:
    ckpt = read_checkpoint(args.drafter)
    drafter = parse_drafter_config(ckpt.config, ckpt.folder / "config.json")
    target = None
    if args.target is not None:
        target = parse_target_config(read_config(args.target), args.target / "config.json")
    findings = check_drafter(ckpt, drafter, target, release, args.flags, target_folder=args.target)
    code = 1 if has_problem(findings) else 0
    if release is None:  # exit 0 here must not read as a pass in CI (JSON: "engine": null says it)
        if not args.json:
            print(report.NO_ENGINE_WARNING, file=err)
        code = 1 if args.strict else code
    if args.json:
        print(json.dumps(report.check_json(ckpt, args.target, release, findings, code), indent=2), file=out)
    else:
        print("\n".join(report.check_lines(ckpt, drafter, args.target, target, release, findings)), file=out)
    return code


def _fix(args: argparse.Namespace, release: Release | None, out: TextIO, err: TextIO) -> int:
    done = fix_drafter(args.drafter, args.out, args.target, release, progress=None if args.json else _progress(err))
    assert release is not None  # fix_drafter refuses to run without one
    code = 1 if done.remaining else 0
    if args.json:
        print(json.dumps(report.fix_json(done, release, code), indent=2), file=out)
    else:
        lines = report.fix_lines(done, release)
        if lines:
            print("\n".join(lines), file=out)
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
