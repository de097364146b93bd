"""Command line: ``python -m patcher`` / ``patcher``: the arguments, the dispatch, the exit code.
What each report looks like is ``patcher.cli.report``'s; only ``patcher/cli/`` prints.

Exit codes: 0 everything in the wanted state; 1 a family is not (pending, lost, refused,
blocked, conflict, unknown release, failed probe; with --strict also warnings, untested
releases and probes that could not import); 2 usage or environment error; 141 stdout was
closed by its reader (as SIGPIPE would end a shell tool).

Over 300 lines: the argument definitions of every subcommand, with their help texts, and the one
place that turns reports and errors into output and exit codes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import sys
import traceback
from pathlib import Path
from typing import TextIO

from patcher import __version__, engine_specs, program
from patcher.cli.parser import Parser
from patcher.cli.report import SCHEMA, as_dict, as_text, grouped, summary
from patcher.core import catalogue, manifest, selection
from patcher.errors import NotInstalled, PatcherError
from patcher.installer import actions

EXIT_USAGE = 2
_NOT_OK = ("pending, lost, refused, blocked, conflict, unknown release,\n"
           "     a failed probe; with --strict also warnings, untested releases and probes\n"
           "     that could not import")
_ENV = ("2    usage or environment error (bad flags, engine not installed, --python not a Python,\n"
        "     a folder on the path shadowing the install, altered patch set, failed write rolled back)\n"
        "130  stopped by Ctrl-C (a write it had begun is finished or rolled back by the next run)\n"
        "141  stdout closed by its reader ('| head') before the report was written, as SIGPIPE ends a shell tool")
EXITS = {  # docs/reference.md's "Exit codes", per command
    "apply": "exit codes:\n0    every selected family is applied or upstream after the run, probes passed (or\n"
             "     could not import)\n"
             f"1    a family is not: {_NOT_OK};\n     or nothing was written because of a conflict\n{_ENV}",
    "verify": "exit codes:\n0    every selected family is applied or upstream, probes passed (or could not import)\n"
              f"1    a family is not: {_NOT_OK}\n{_ENV}",
    "revert": "exit codes:\n0    nothing of ours is left in the selected families\n"
              "1    a family is still ours: a conflict (a file edited after apply is left as it is;\n"
              f"     the report names it and the pip reinstall that restores it)\n{_ENV}",
    "port": "exit codes:\n0    every selected family holds on the release or was carried and proven\n"
            "1    a family needs a person (flagged: what upstream changed is in the report);\n"
            "     nothing of it is written, and releases.txt does not list the release while a\n"
            "     family's range holds it there\n"
            "2    usage error, or the release cannot be fetched from the package index",
}
PORT_EXTRA = ("merge3",)  # pyproject's [port] extra: only 'patcher port' imports it
EXIT_PIPE = 128 + signal.SIGPIPE  # 141: what a shell reports for a tool killed by SIGPIPE
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130: what a shell reports for a tool stopped by Ctrl-C


class _Version(argparse.Action):
    """--version: which diffs a bug report ran, not only the package version. Computed when asked,
    so other commands do not hash patches/ on every start."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"patcher {__version__} ({catalogue.identity_line()})")
        parser.exit()


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def _selection_flags(p: argparse.ArgumentParser, what: str) -> None:
    scope = ("installed or not: the catalogue lists what we ship" if what == "list" else
             "with 'all', engines that are not installed are left out")
    p.add_argument("--engine", choices=(*engine_specs.NAMES, "all"), default="all",
                   help=f"which engine's families to {what}: {', '.join(engine_specs.NAMES)} or all "
                        f"(default: all; {scope})")
    p.add_argument("--only", action="append", default=[], metavar="ID",
                   help="only this family: 'sglang/<id>' or '<id>' for every engine that has it "
                        "(repeatable; default: every family applied by default)")
    p.add_argument("--skip", action="append", default=[], metavar="ID",
                   help="leave this family out (repeatable; default: none); naming one family in both "
                        "--only and --skip is an error")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout (default: text)")
    p.add_argument("--debug", action="store_true",
                   help="tracebacks on errors (default: off)" if what == "list" else
                   "tracebacks on errors, and how the probes ran: children forked from one interpreter "
                   "that preloaded torch & co, or one fresh interpreter each, and why (default: off)")
    p.add_argument("--patches", type=Path, default=manifest.PATCHES, help=argparse.SUPPRESS)


def _parser() -> argparse.ArgumentParser:
    ap = Parser(prog="patcher", description="EAGLE-3 / Kimi-K2 and SM120 fusion patches "
                 "for installed vLLM and SGLang releases.")
    ap.add_argument("--version", action=_Version, help="the package version and the patch set it carries "
                    "(families, variants, a hash of patches/), then exit")
    # each command's usage line names the program as it was started (the top line stays 'patcher')
    sub = ap.add_subparsers(dest="command", required=True, prog=program.name())
    for name, helptext in (("apply", "apply every patch this release needs, all or nothing"),
                           ("verify", "read-only: the state of every family, with probes"),
                           ("revert", "back to the published files (checked against RECORD)")):
        p = sub.add_parser(name, help=helptext, description=helptext, epilog=EXITS[name],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        _selection_flags(p, name)
        where = p.add_mutually_exclusive_group()
        where.add_argument("--python", metavar="PATH", help="interpreter of the environment to act on: the engine "
                           "is located by it and probes run in it (default: the python running patcher)")
        where.add_argument("--site", type=Path, metavar="DIR", help="a site-packages directory to act on, without "
                           "an interpreter (probes run in this python with DIR first on sys.path; default: none)")
        p.add_argument("--strict", action="store_true", help="also exit 1 on warnings, untested releases and "
                       "probes that could not import (default: off)")
        loud = p.add_mutually_exclusive_group()
        loud.add_argument("-q", "--quiet", action="store_true", help="print only families that are not ok, what "
                          "changed, and the closing line (default: every family)")
        loud.add_argument("-v", "--verbose", action="store_true", help="also print what was checked (each file's "
                          "state, each probe's import time) and the seconds each phase took (default: off)")
        p.add_argument("--no-probes", action="store_true", help="skip the import-time probes (default: probes run)")
        p.add_argument("--probe-timeout", type=_seconds, default=180.0, metavar="S",
                       help="seconds the probes of one engine may take, > 0 (default: 180)")
        if name in ("apply", "revert"):
            p.add_argument("--dry-run", action="store_true", help="print the plan and write nothing; exits "
                           "as the real run would, before probes (default: off)")
        if name == "apply":
            p.add_argument("--allow-untested", action="store_true", help="apply on a release no variant declares "
                           "when its files match a variant's pre-image byte for byte (default: off)")
    listing = sub.add_parser("list", help="the catalogue: every family, its variants and the releases each covers",
                             description=f"The catalogue we ship, not this install: '{program.command('verify')}' "
                                         "says what an install gets.")
    _selection_flags(listing, "list")
    from patcher.cli import drafter_cli

    drafter_cli.add_parser(sub)
    from patcher.cli import doctor_cli

    doctor_cli.add_parser(sub)
    port = sub.add_parser("port", help="maintainers: carry the patch set to a release no variant covers, proven",
                          description="Maintainers: for a release no variant covers, say per family whether "
                          "what ships still holds by content, or carry the nearest variant there with a "
                          "three-way merge and prove it on the release's published files (apply, verify, "
                          "revert, probes); a family whose upstream code changed is flagged for a person. "
                          "Needs the [port] extra (merge3) and the package index.",
                          epilog=EXITS["port"], formatter_class=argparse.RawDescriptionHelpFormatter)
    port.add_argument("--engine", choices=engine_specs.NAMES, required=True, help="whose patch set (required)")
    port.add_argument("--to", metavar="VERSION", help="the release to carry the patch set to")
    port.add_argument("--newer", action="store_true", help="every release on the index that releases.txt lacks")
    port.add_argument("--family", action="append", default=[], metavar="ID", help="only this family (repeatable)")
    port.add_argument("--from", dest="source", metavar="VARIANT",
                      help="carry this variant; ignore what covers the release")
    port.add_argument("--out", type=Path, metavar="DIR", help="write <family>/<id>.diff, patch.toml, releases.txt here")
    port.add_argument("--no-probes", action="store_true", help="prove on the files only (no CPU import env)")
    port.add_argument("--json", action="store_true", help="the report as JSON on stdout (default: text)")
    port.add_argument("--debug", action="store_true", help="tracebacks on errors (default: off)")
    port.add_argument("--patches", type=Path, default=manifest.PATCHES, help=argparse.SUPPRESS)
    return ap


def _options(args: argparse.Namespace, err: TextIO | None = None) -> actions.Options:
    return actions.Options(
        python=args.python, site=args.site, only=tuple(args.only), skip=tuple(args.skip),
        dry_run=getattr(args, "dry_run", False), strict=args.strict,
        allow_untested=getattr(args, "allow_untested", False), probes=not args.no_probes,
        probe_timeout=args.probe_timeout, patches=args.patches, debug=_debug(args.debug, err),
        progress=_progress(args, err))


def _debug(on: bool, err: TextIO | None):
    """--debug: the installer's lines on how the probes ran, on stderr."""
    return (lambda line: print(line, file=err or sys.stderr)) if on else None


def _progress(args: argparse.Namespace, err: TextIO | None):
    """Lines on stderr while the probes run (10-30 s on a real engine), for a person at a terminal:
    never when stderr is piped or captured, with --json, or with -q."""
    isatty = getattr(err, "isatty", None)
    if err is None or args.json or getattr(args, "quiet", False) or not (isatty and isatty()):
        return None
    return lambda line: print(line, file=err, flush=True)


def _error(exc: PatcherError, err: TextIO, debug: bool, out: TextIO | None = None, command: str = "") -> int:
    """The one place errors are printed. With --json, stdout also gets them as JSON so a
    machine reading stdout always has something to parse, named by the command's schema."""
    if debug:
        traceback.print_exc(file=err)
    for line in exc.lines():
        print(line, file=err)
    if out is not None:
        schema = {"list": catalogue.SCHEMA, "port": "", "drafter": "", "drafter check": "patcher.drafter.check/1",
                  "drafter fix": "patcher.drafter.fix/1"}.get(command, SCHEMA)
        print(json.dumps({**({"schema": schema} if schema else {}),
                          "error": {"what": exc.what, "wanted": exc.wanted, "found": exc.found,
                                    "hint": exc.hint}, "exit": exc.exit_code}), file=out)
    return exc.exit_code


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    opts = _options(args, err)
    scope = selection.scope(args.engine, opts.only, opts.skip, opts.patches)
    action = {"apply": actions.apply, "verify": actions.verify, "revert": actions.revert}[args.command]
    reports = []
    for engine in scope:
        try:
            reports.append(action(engine, opts))
        except NotInstalled:
            if len(scope) == 1:
                raise
    if not reports:  # several engines in scope, none installed
        given = "--python" if opts.python else "--site" if opts.site else None
        raise NotInstalled(f"neither {' nor '.join(scope)} is installed",
                           wanted=f"a distribution of {' or '.join(scope)} in the environment patcher reads",
                           found="none (" + (f"site: {opts.site}" if opts.site
                                             else f"python: {opts.python or sys.executable}") + ")",
                           hint=f"point {given} at the environment that runs the engine" if given
                           else "pass --python or --site for the engine's environment")
    code = max(r.exit_code(opts.strict) for r in reports)
    why = "exit 1: " + "; ".join(grouped([w for r in reports for w in r.reasons(opts.strict)]))
    if args.json:
        patch_set = catalogue.identity(opts.patches)  # which diffs ran, for a bug report
        print(json.dumps([{**as_dict(r, opts.strict), "patch_set": patch_set} for r in reports], indent=1), file=out)
        return code
    said: dict[str, str] = {}  # each warning and 'turn on' text once per run
    lines = [line for r in reports for line in as_text(r, opts.strict, said, quiet=args.quiet, verbose=args.verbose)]
    if code:  # a non-zero exit always says why, last (JSON: each report's "reasons")
        lines.append(why)
    elif lines or args.command == "verify":  # a clean one what it found (a -q no-op apply: nothing)
        lines.append(summary(reports))
    for line in lines:
        print(line, file=out)
    return code


def run_drafter(args: argparse.Namespace, out: TextIO, err: TextIO, detect) -> int:
    """``patcher drafter check|fix`` with ``detect`` locating the engine (tests pass a stand-in)."""
    from patcher.cli import drafter_cli

    try:
        return drafter_cli.run(args, out=out, err=err, detect=detect)
    except PatcherError as exc:
        return _error(exc, err, False, out if args.json else None, f"drafter {args.drafter_command}")


def _usage_facts(exc: PatcherError, parser: argparse.ArgumentParser, argv: list[str],
                 command: list[str] | None) -> None:
    """A usage error says what was wanted and found like every other error: the flags the command
    takes, the one given; the flag meant when one is close ('--dry' for '--dry-run'); for doctor,
    that the server command goes after '--'."""
    import difflib

    value = re.search(r"argument (--[\w-]+): (.+) is not a positive number of seconds$", exc.what)
    if value:  # --probe-timeout 0: what the flag takes, not the command's usage line
        exc.wanted, exc.found = f"{value[1]} SECONDS, a number above 0", f"{value[1]} {value[2]}"
    choice = re.search(r"argument (\S+): invalid choice: '(.*)' \(choose from (.+)\)$", exc.what)
    if choice:
        exc.wanted, exc.found = f"{choice[1]} one of {choice[3]}", f"{choice[1]} {choice[2]}"
        close = difflib.get_close_matches(choice[2], re.findall(r"'([^']+)'", choice[3]), n=1, cutoff=0.6)
        if close:  # 'patcher verfy'
            exc.hint = f"did you mean {close[0]}? {exc.hint}"
    both = re.search(r"argument (\S+): not allowed with argument (\S+)$", exc.what)
    if both:
        exc.wanted, exc.found = f"{both[2]} or {both[1]}, not both", f"{both[2]} and {both[1]}"
    m = re.search(r"unrecognized arguments: (.+)$", exc.what)
    words, level = _command_words(parser, argv)
    flags = sorted({o for act in level._actions for o in act.option_strings
                    if o.startswith("--") and act.help is not argparse.SUPPRESS})
    exc.found = exc.found or (m.group(1) if m else " ".join(argv)[:120])
    exc.wanted = exc.wanted or (f"one of {', '.join(flags)}" if flags and m else
                                program.command(f"{' '.join(words)} ..."))
    if m and words[:1] == ["doctor"] and command is None:
        exc.hint = f"put the server command after '--': {program.command('doctor [--python P] --')} {m.group(1)}"
        return
    if m:
        given = m.group(1).split()[0].split("=")[0]
        names = {f[2:]: f for f in flags}  # compared without the dashes every flag shares
        close = [f for f in flags if f.startswith(given)][:1] or [
            names[n] for n in difflib.get_close_matches(given.lstrip("-"), list(names), n=1, cutoff=0.75)]
        if close:
            exc.hint = f"did you mean {close[0]}? {exc.hint}"


def _command_words(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], argparse.ArgumentParser]:
    """The (sub)command words given (``["drafter", "check"]``) and the parser of the last one."""
    words, level = [], parser
    for a in (a for a in argv if not a.startswith("-")):
        subs = [x for x in level._actions if isinstance(x, argparse._SubParsersAction)]
        if not subs or a not in subs[0].choices:
            break
        words.append(a)
        level = subs[0].choices[a]
    return words, level


def _help_hint(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """'patcher verify --help' (or 'patcher drafter check --help') for the command given."""
    words, _ = _command_words(parser, argv)
    return f"'{program.command(' '.join(words) + ' --help')}' lists the flags and their defaults" if words else ""


def as_invoked(python: str) -> str:
    """How the user runs us, for the commands hints name: 'patcher' where that console script is
    this install's (beside ``python``), else ``python -m patcher`` (a venv not on PATH: the
    README's set-up, where a bare 'patcher' runs another install or none)."""
    import shutil

    script = shutil.which("patcher")
    if script and Path(script).resolve().parent == Path(python).parent.resolve():
        return "patcher"
    shown = Path(python)
    with contextlib.suppress(ValueError):  # .venv/bin/python, as the README's set-up types it
        if Path.cwd() != Path(Path.cwd().anchor):
            shown = Path(python).absolute().relative_to(Path.cwd())
    return f"{shown} -m patcher"


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None,
         prog: str = "patcher") -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else argv
    # Every command a line names reads as the program was started; JSON keeps the plain name.
    try:
        with program.named(prog if "--json" not in argv else program.NAME):
            code = _main(argv, out, err)
        out.flush()  # here, not at interpreter exit, where a closed pipe could no longer be handled
        return code
    except BrokenPipeError:
        # The reader went away ('patcher verify | head -1'): stop quietly with the status a shell
        # tool killed by SIGPIPE has, not a traceback and exit 1 that reads as an unhealthy install.
        _stop_writing(out)
        return EXIT_PIPE
    except KeyboardInterrupt:
        # Ctrl-C: one line, not a 30-line traceback. Writes are journaled: one cut short is finished or
        # rolled back by the next patcher command that takes the lock; the files are never half ours.
        where = " ".join(a for a in argv[:1])
        print(f"interrupted: {prog} {where} stopped by Ctrl-C; a write it had begun is finished or rolled back "
              f"by the next {prog} command. Run '{prog} verify' to see each family's state", file=err)
        return EXIT_INTERRUPTED


def _stop_writing(out: TextIO) -> None:
    """Point a closed stdout at /dev/null, so the interpreter's last flush does not fail again."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (tests pass a StringIO)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _main(argv: list[str], out: TextIO, err: TextIO) -> int:
    if not argv:  # bare `patcher`: what it can do, as `git` or `pip` alone print, not an error
        print(_parser().format_help(), file=out, end="")
        return 0
    command = None
    if argv[:1] == ["doctor"]:  # everything after '--' is the server command, not ours to parse
        from patcher.cli.doctor_cli import split_argv
        argv, command = split_argv(argv)
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help and --version
        return int(exc.code or 0) and EXIT_USAGE
    except PatcherError as exc:
        exc.hint = _help_hint(parser, argv) or exc.hint
        _usage_facts(exc, parser, argv, command)
        name = " ".join([a for a in argv if not a.startswith("-")][:2] if argv[:1] == ["drafter"] else
                        [a for a in argv if not a.startswith("-")][:1])
        return _error(exc, err, False, out if "--json" in argv else None, name)
    if args.command == "doctor":
        from patcher.cli import doctor_cli
        return doctor_cli.run(args, command, out=out, err=err)
    if args.command == "drafter":
        from patcher.drafter.locate import drafter_detect
        return run_drafter(args, out, err, drafter_detect)
    if args.command == "port":  # maintainer tooling: the merge library and the fetcher load only here
        try:
            from patcher.cli import port_cli
        except ModuleNotFoundError as exc:
            if exc.name not in PORT_EXTRA:
                raise
            return _error(PatcherError(f"{program.command('port')} needs the 'port' extra",
                                       wanted=f"the {exc.name} library",
                                       found=f"no module named {exc.name!r} in {sys.executable}",
                                       hint="pip install 'kimi-patcher[port]'"), err, args.debug,
                          out if args.json else None, "port")
        try:
            code, text = port_cli.run(args)
        except PatcherError as exc:
            return _error(exc, err, args.debug, out if args.json else None, "port")
        print(text, file=out)
        return code
    try:
        if args.command == "list":
            fams = catalogue.families(args.engine, tuple(args.only), tuple(args.skip), args.patches)
            text = (json.dumps({"schema": catalogue.SCHEMA, "catalogue": True, "families": catalogue.rows(fams)},
                               indent=1) if args.json
                    else "\n".join(catalogue.lines(fams)))
            print(text, file=out)
            return 0
        return _run(args, out, err)
    except PatcherError as exc:
        return _error(exc, err, args.debug, out if args.json else None, args.command)


if __name__ == "__main__":
    sys.exit(main())
