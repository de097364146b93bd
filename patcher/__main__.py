"""Command line: ``python -m patcher`` / ``patcher``. The only module that prints or exits.

Exit codes: 0 everything in the wanted state; 1 a family is not (pending, lost, refused,
blocked, conflict, unknown release, failed probe; with --strict also warnings, untested
releases and probes that could not import); 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any, TextIO

from . import __version__, actions, manifest
from .errors import NotInstalled, PatcherError
from .report import as_dict, as_text

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="patcher", description="EAGLE-3 / Kimi-K2 and SM120 fusion patches "
                                 "for installed vLLM and SGLang releases.")
    ap.add_argument("--version", action="version", version=f"patcher {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--engine", choices=("vllm", "sglang", "all"), default="all")
    common.add_argument("--python", help="interpreter of the environment to act on (default: this one)")
    common.add_argument("--site", type=Path, help="site-packages directory to act on, without an interpreter")
    common.add_argument("--only", action="append", default=[], metavar="ID", help="only this family (repeatable)")
    common.add_argument("--skip", action="append", default=[], metavar="ID", help="not this family (repeatable)")
    common.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    common.add_argument("--strict", action="store_true", help="anything short of fully patched is an error")
    common.add_argument("--no-probes", action="store_true", help="skip the import-time probes")
    common.add_argument("--probe-timeout", type=float, default=180.0, metavar="S")
    common.add_argument("--debug", action="store_true", help="tracebacks on errors")
    common.add_argument("--patches", type=Path, default=manifest.PATCHES, help=argparse.SUPPRESS)
    for name, helptext in (("apply", "apply every patch this release needs, all or nothing"),
                           ("verify", "read-only: the state of every family, with probes"),
                           ("revert", "back to the published files (checked against RECORD)"),
                           ("list", "families, variants and what applies here")):
        p = sub.add_parser(name, parents=[common], help=helptext)
        if name in ("apply", "revert"):
            p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
        if name == "apply":
            p.add_argument("--allow-untested", action="store_true",
                           help="apply on a release no variant declares when its files match a variant exactly")
    from .drafter import cli as drafter_cli

    drafter_cli.add_parser(sub)
    port = sub.add_parser("port", help="maintainers: carry the patch set to a release no variant covers, proven")
    port.add_argument("--engine", choices=("vllm", "sglang"), required=True)
    port.add_argument("--to", metavar="VERSION", help="the release to carry the patch set to")
    port.add_argument("--newer", action="store_true", help="every release on the index that releases.txt lacks")
    port.add_argument("--family", action="append", default=[], metavar="ID", help="only this family (repeatable)")
    port.add_argument("--from", dest="source", metavar="VARIANT",
                      help="carry this variant; ignore what covers the release")
    port.add_argument("--out", type=Path, metavar="DIR", help="write <family>/<id>.diff, patch.toml, releases.txt here")
    port.add_argument("--no-probes", action="store_true", help="prove on the files only (no CPU import env)")
    for flag in ("--json", "--debug"):
        port.add_argument(flag, action="store_true")
    port.add_argument("--patches", type=Path, default=manifest.PATCHES, help=argparse.SUPPRESS)
    return ap


def _options(args: argparse.Namespace) -> actions.Options:
    return actions.Options(
        python=args.python, site=args.site, only=tuple(args.only), skip=tuple(args.skip),
        dry_run=getattr(args, "dry_run", False), strict=args.strict,
        allow_untested=getattr(args, "allow_untested", False), probes=not args.no_probes,
        probe_timeout=args.probe_timeout, patches=args.patches)


def _error(exc: PatcherError, err: TextIO, debug: bool, out: TextIO | None = None) -> int:
    """The one place errors are printed. With --json, stdout also gets them as JSON so a
    machine reading stdout always has something to parse."""
    if debug:
        traceback.print_exc(file=err)
    for line in exc.lines():
        print(line, file=err)
    if out is not None:
        print(json.dumps({"error": {"what": exc.what, "wanted": exc.wanted, "found": exc.found,
                                    "hint": exc.hint}, "exit": exc.exit_code}), file=out)
    return exc.exit_code


def _list(args: argparse.Namespace, opts: actions.Options, out: TextIO) -> int:
    rows: list[dict[str, Any]] = []
    for fam in manifest.load_all(opts.patches):
        if args.engine not in ("all", fam.engine):
            continue
        rows.append({"id": fam.id, "title": fam.title, "default": fam.default,
                     "variants": {v.id: str(v.versions) for v in fam.variants},
                     "upstream": [{"versions": str(u.versions), "since": u.since} for u in fam.upstream],
                     "refused": [{"versions": str(r.versions), "use": r.use} for r in fam.refused]})
    if args.json:
        print(json.dumps({"families": rows}, indent=1), file=out)
        return 0
    for r in rows:
        print(f"{r['id']}: {r['title']}" + ("" if r["default"] else " (opt-in)"), file=out)
        for vid, spec in r["variants"].items():
            print(f"  variant {vid}: {spec}", file=out)
        for u in r["upstream"]:
            print(f"  upstream since {u['since']}: {u['versions']}", file=out)
        for x in r["refused"]:
            print(f"  refused {x['versions']} (use {x['use']})", file=out)
    return 0


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage
        return int(exc.code or 0) and EXIT_USAGE
    if args.command == "drafter":
        from .detect import drafter_detect
        from .drafter import cli as drafter_cli
        return drafter_cli.run(args, out=out, err=err, detect=drafter_detect)
    if args.command == "port":  # maintainer tooling: the merge library and the fetcher load only here
        from .maintainer import port_cli
        try:
            code, text = port_cli.run(args)
        except PatcherError as exc:
            return _error(exc, err, args.debug, out if args.json else None)
        print(text, file=out)
        return code
    opts = _options(args)
    try:
        if args.command == "list":
            return _list(args, opts, out)
        action = {"apply": actions.apply, "verify": actions.verify, "revert": actions.revert}[args.command]
        reports, code = [], 0
        for engine in manifest.ENGINES if args.engine == "all" else (args.engine,):
            try:
                report = action(engine, opts)
            except NotInstalled:
                if args.engine != "all":
                    raise
                continue  # --engine all: act on the engines that are installed
            reports.append(report)
            code = max(code, report.exit_code(opts.strict))
        if not reports:
            raise PatcherError("neither vllm nor sglang is installed",
                               found=f"site: {opts.site}" if opts.site else f"python: {opts.python or sys.executable}",
                               hint="pass --python or --site for the engine's environment")
    except PatcherError as exc:
        return _error(exc, err, args.debug, out if args.json else None)
    if args.json:
        print(json.dumps([as_dict(r, r.exit_code(opts.strict)) for r in reports], indent=1), file=out)
    else:
        for r in reports:
            for line in as_text(r):
                print(line, file=out)
    return code


if __name__ == "__main__":
    sys.exit(main())
