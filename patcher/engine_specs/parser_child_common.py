"""The part every engine's parser child shares; ``release_parser`` sends it first, then the
engine's own script (``<engine>/parser_child.py``), as one program to the engine's interpreter.

The engine's script defines ``load()`` (import what its parser needs; any exception: the parser
cannot run here), ``parse(line, dests, loaded)`` (the values of the options doctor reads, or
SystemExit/an exception as the release raises them) and ``table(entry, loaded)`` (the option
table), then calls ``run(load, parse, table)``. Each answer is one line: the marker, then JSON.

Standard library only: it runs inside the engine's environment.
"""

import contextlib
import io
import json
import os
import re
import sys

MARK = "@@kimi-patcher-parse@@ "


class Recorded(Exception):
    """Raised by a recorder put in place of the engine's next step: the parse is over."""


def say(**result):
    print(MARK + json.dumps(result, default=str), flush=True)


def plain(text):
    """Without memory addresses (``<function loads at 0x7f...>``): the same line reads the same."""
    return re.sub(r" at 0x[0-9a-f]+", "", text)[:400]


@contextlib.contextmanager
def launch_environ(line):
    """The command's own assignments (``VAR=value vllm serve ...``) in force while the release's
    start-up configuration runs, and this process's environment as it was afterwards: start-up
    code writes variables too, and the next line asked must not see them."""
    saved = dict(os.environ)
    for name, value in (line.get("env") or {}).items():  # None: the server starts without it
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def one(parse, line, dests, loaded):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return {"status": "parsed", "values": parse(line, dests, loaded)}
    except SystemExit as exc:  # argparse's error(): the message is the last line it printed
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"status": "rejected", "code": exc.code, "error": plain((lines or [f"exit {exc.code}"])[-1])}
    except Exception as exc:  # the release raises on the line (a bad value, options it refuses together)
        return {"status": "rejected", "code": None, "error": plain(f"{type(exc).__name__}: {exc}")}


def option_table(parser):
    """Every option string of an argparse parser, the ones of each dest, and whether it takes prefixes."""
    dests = {}
    for action in parser._actions:
        dests.setdefault(action.dest, []).extend(action.option_strings)
    return {"options": sorted(o for opts in dests.values() for o in opts), "dests": dests,
            "abbrev": parser.allow_abbrev}


def run(load, parse, table):
    req = json.loads(sys.argv[1])
    try:
        loaded = load()
    except BaseException as exc:  # an import that fails in any way: the parser cannot run here
        say(status="unavailable", error=f"{type(exc).__name__}: {exc}"[:300])
        return
    if req.get("table"):
        with contextlib.redirect_stderr(io.StringIO()):
            say(status="table", **table(req["table"], loaded))
    for line in req["lines"]:
        say(**one(parse, line, req["dests"], loaded))
    if req.get("more_on_stdin"):  # lines the caller built from the table: one import serves both
        for line in json.loads(sys.stdin.read() or "[]"):
            say(**one(parse, line, req["dests"], loaded))
