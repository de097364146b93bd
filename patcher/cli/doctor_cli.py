"""``patcher doctor [--python P | --site D] [--json] [--probes] -- <server command>``: the
arguments; the report is rendered by ``patcher.cli.report``.

Exit codes: 0 go; 1 no-go (every reason listed, last); 2 usage or environment error; 3 cannot
tell (no reason proven, but a line the release may read otherwise, listed as unknown). The
``--json`` object (``patcher.doctor/1``) is documented in docs/reference.md, section "patcher doctor".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import traceback
from pathlib import Path
from typing import TextIO

from patcher import program
from patcher.cli import report
from patcher.cli.heartbeat import Heartbeat
from patcher.doctor import verdict, which_engine
from patcher.environment import gpus
from patcher.errors import LaunchUsageError, PatcherError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "doctor", usage=program.command("doctor [--python PATH | --site DIR] [--strict] [--gpu SM] [--probes] "
                                        "[--json] [--debug] -- COMMAND ..."),
        help="judge a server launch command before the 36-minute load: go or no-go",
        description=f"Put the exact server command after '--': {program.command('doctor')} -- vllm serve T "
                    "--speculative-config '{...}' -tp 8. Exit 0: go; 1: no-go, with every reason; 2: usage or "
                    "environment error; 3: cannot tell (what could not be read is listed).")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--python", metavar="PATH", help="interpreter of the environment that runs the server "
                       "(default: the one the command names by path, else the python running patcher)")
    where.add_argument("--site", type=Path, metavar="DIR", help="site-packages directory holding the engine, "
                       "without an interpreter (default: none)")
    p.add_argument("--probes", action="store_true", help="also run verify's import-time probes (default: off)")
    p.add_argument("--strict", action="store_true", help="judge the whole install: every family verify does not "
                   "accept is a reason, whether or not this launch meets it (default: only those it meets)")
    p.add_argument("--gpu", metavar="SM", help="the compute capability of the GPUs the server runs on (sm90, 10.0, "
                   "sm120), where doctor runs elsewhere (default: nvidia-smi's answer, else not seen)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (default: text)")
    p.add_argument("--debug", action="store_true", help="tracebacks on errors (default: off)")
    return p


def _heartbeat(args: argparse.Namespace, err: TextIO) -> Heartbeat | contextlib.nullcontext:
    """Lines on stderr while a slow step runs, at a terminal only (never with --json or piped)."""
    isatty = getattr(err, "isatty", None)
    if args.json or not (isatty and isatty()):
        return contextlib.nullcontext(None)  # nothing to tell: doctor is handed no callback at all
    return Heartbeat(err, "doctor")


def split_argv(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """(patcher's arguments, the server command after the first '--'; None when there is no '--')."""
    if "--" not in argv:
        return argv, None
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def run(args: argparse.Namespace, command: list[str] | None, *, out: TextIO, err: TextIO) -> int:
    try:
        if command is None:
            raise LaunchUsageError("doctor needs the server command after '--'",
                                   wanted=program.command("doctor [--python P | --site D] [--json] -- vllm serve "
                                                          "T ..."),
                                   found="no '--' in the arguments")
        cmd = which_engine.read_command(command, python=args.python, site=args.site)
        with _heartbeat(args, err) as beat:
            judged = verdict.diagnose(cmd, python=args.python, site=args.site, probes=args.probes,
                                     strict=args.strict, gpu=_gpu(args.gpu),
                                     stage=beat.stage if beat is not None else None)
    except which_engine.EngineMismatch as exc:
        return _mismatch(exc, command or [], args.json, out)
    except PatcherError as exc:
        if args.debug:
            traceback.print_exc(file=err)
        for line in exc.lines():
            print(line, file=err)
        if args.json:
            error = {"what": exc.what, "wanted": exc.wanted, "found": exc.found, "hint": exc.hint}
            print(json.dumps({"schema": verdict.SCHEMA, "error": error, "exit": exc.exit_code}, indent=2), file=out)
        return exc.exit_code
    if args.json:
        print(json.dumps(report.doctor_json(judged), indent=2), file=out)
    else:
        print("\n".join(report.doctor_lines(judged)), file=out)
    return judged.exit_code


def _gpu(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return gpus.parse(text)
    except ValueError:
        raise LaunchUsageError("--gpu is not a compute capability", wanted="e.g. --gpu sm90, --gpu 10.0, --gpu sm120",
                               found=repr(text)) from None


def _mismatch(exc: which_engine.EngineMismatch, command: list[str], as_json: bool, out: TextIO) -> int:
    if as_json:
        print(json.dumps(report.mismatch_json(exc, command), indent=2), file=out)
    else:
        print("\n".join(report.mismatch_lines(exc)), file=out)
    return 1
