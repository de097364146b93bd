"""``patcher doctor [--python P | --site D] [--json] [--probes] -- <server command>``: prints.

Exit codes: 0 go; 1 no-go (every reason listed, last); 2 usage or environment error. The
``--json`` object (``patcher.doctor/1``) is documented in docs/reference.md, section "patcher doctor".
"""

from __future__ import annotations

import argparse
import json
import traceback
from pathlib import Path
from typing import TextIO

from . import doctor
from .drafter.cli import print_finding
from .drafter.findings import LEVELS, tally
from .errors import PatcherError
from .launch_command import LaunchUsageError, parse
from .report import as_dict, as_text


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "doctor", usage="patcher doctor [--python PATH | --site DIR] [--probes] [--json] [--debug] -- COMMAND ...",
        help="judge a server launch command before the 36-minute load: go or no-go",
        description="Put the exact server command after '--': patcher doctor -- vllm serve T --speculative-config "
                    "'{...}' -tp 8. Exit 0: go; 1: no-go, with every reason; 2: usage or environment error.")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--python", metavar="PATH", help="interpreter of the environment that runs the server "
                       "(default: the one the command names by path, else the python running patcher)")
    where.add_argument("--site", type=Path, metavar="DIR", help="site-packages directory holding the engine, "
                       "without an interpreter (default: none)")
    p.add_argument("--probes", action="store_true", help="also run verify's import-time probes (default: off)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (default: text)")
    p.add_argument("--debug", action="store_true", help="tracebacks on errors (default: off)")
    return p


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
                                   wanted="patcher doctor [--python P | --site D] [--json] -- vllm serve T ...",
                                   found="no '--' in the arguments")
        cmd = parse(command)
        report = doctor.diagnose(cmd, python=args.python, site=args.site, probes=args.probes)
    except doctor.EngineMismatch as exc:
        return _mismatch(exc, command or [], args.json, out)
    except PatcherError as exc:
        if args.debug:
            traceback.print_exc(file=err)
        for line in exc.lines():
            print(line, file=err)
        if args.json:
            error = {"what": exc.what, "wanted": exc.wanted, "found": exc.found, "hint": exc.hint}
            print(json.dumps({"schema": doctor.SCHEMA, "error": error, "exit": exc.exit_code}, indent=2), file=out)
        return exc.exit_code
    if args.json:
        print(json.dumps(as_json(report), indent=2), file=out)
    else:
        for line in as_lines(report):
            print(line, file=out)
    return report.exit_code


def _mismatch(exc: doctor.EngineMismatch, command: list[str], as_json_: bool, out: TextIO) -> int:
    if as_json_:
        print(json.dumps({"schema": doctor.SCHEMA, "command": command, "engine": None, "verify": None,
                          "findings": [], "counts": {level: 0 for level in LEVELS}, "verdict": "no-go",
                          "reasons": [exc.what], "next": [], "exit": 1}, indent=2), file=out)
        return 1
    for line in exc.lines():
        print(line.replace("error: ", "no-go: ", 1), file=out)
    print("verdict: no-go", file=out)
    print(f"exit 1: {exc.what}", file=out)
    return 1


def as_json(r: doctor.DoctorReport) -> dict:
    findings = r.findings()
    code = r.exit_code
    release = r.release
    return {
        "schema": doctor.SCHEMA, "command": list(r.command.command),
        "engine": {"name": release.name, "version": str(release.version), "site": str(release.site),
                   "python": release.python},
        "target": r.command.target, "drafter": r.command.drafter, "tp": r.command.tp,
        "env": {name: {"read": v.read, "default": v.default, "value": r.environ.get(name),
                       "from_command": name in r.command.env} for name, v in r.env.items()},
        "verify": as_dict(r.verify, False),
        "findings": [f.to_json() for f in findings],
        "counts": {level: sum(f.level == level for f in findings) for level in LEVELS}
        | {"reasons": len(r.reasons()), "from_verify": len(r.verify.reasons(False))},
        "not_checked": [] if r.probes else ["whether the engine imports here: --probes runs the probes"],
        "verdict": "no-go" if code else "go", "reasons": r.reasons(), "next": r.next_steps(), "exit": code,
    }


class _Collect:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines.extend(text.rstrip("\n").split("\n") if text != "\n" else [])

    def flush(self) -> None:  # print() may call it
        pass


def as_lines(r: doctor.DoctorReport) -> list[str]:
    cmd = r.command
    out = [f"command: {' '.join(cmd.command)[:160]}", f"engine:  {r.release.label()} (installed at {r.release.site})"]
    out.append("verify:" if r.probes else "verify (no probes; --probes runs them):")
    out += ["  " + line for line in as_text(r.verify, False)]
    sink = _Collect()
    out.append("launch:")
    for f in r.launch:
        print_finding(f, sink)  # type: ignore[arg-type]
    if r.drafter:
        sink.lines.append(f"drafter check ({cmd.drafter}):")
        for f in r.drafter:
            print_finding(f, sink)  # type: ignore[arg-type]
    out += sink.lines
    findings = r.findings()
    reasons = r.reasons()
    out += [f"next:    {step}" for step in r.next_steps()]
    from_verify = len(r.verify.reasons(False))
    counted = f"{len(reasons)} reason(s): {from_verify} from verify, " if reasons else ""
    unproven = "" if r.probes else "; not checked: whether the engine imports here (--probes checks it)"
    out.append(f"verdict: {'no-go' if reasons else 'go'} ({counted}{tally(findings)}{unproven})")
    if reasons:
        out.append("exit 1: " + "; ".join(reasons))
    return out
