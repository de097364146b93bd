"""Sent whole to the engine's interpreter (``python -c``): SGLang's own parser reads a server command.

Calls the release's ``prepare_server_args`` (what ``python -m sglang.launch_server`` and
``sglang serve`` call: its option table, argparse's prefixes, the ``--config`` file merge where
the release has it, ``from_cli_args``' mapping onto the fields) with ``ServerArgs.__post_init__``
replaced by a recorder, so the fields are read and the GPU and model checks never run. Prints one
line per command line asked (several share one import): the marker, then JSON with the values
of the options doctor reads.

Standard library and the engine only: it runs inside the engine's environment.
"""

import contextlib
import io
import json
import sys

MARK = "@@kimi-patcher-parse@@ "


class _Recorded(Exception):
    pass


def _say(**result):
    print(MARK + json.dumps(result, default=str), flush=True)


def _parse(line, dests, server_args):
    recorded = {}

    def record(self, *args, **kwargs):
        recorded.update({d: getattr(self, d) for d in dests if hasattr(self, d)})
        raise _Recorded

    # The fields as ServerArgs.from_cli_args hands them to the record (its own mapping, e.g.
    # --tensor-parallel-size onto tp_size), before __post_init__'s GPU and model checks. From
    # 0.5.20 the record is a msgspec Struct that resolves nothing at construction (its
    # __post_init__ is fixed when the class is made): the returned record is read instead.
    real = server_args.ServerArgs.__dict__.get("__post_init__")
    server_args.ServerArgs.__post_init__ = record
    try:
        made = server_args.prepare_server_args(list(line["argv"]))
        recorded.update({d: getattr(made, d) for d in dests if hasattr(made, d)})
    except _Recorded:
        pass
    finally:
        if real is not None:
            server_args.ServerArgs.__post_init__ = real
    return recorded


def _table(server_args):
    """Every option string of the parser prepare_server_args builds, and the ones of each dest."""
    import argparse

    seen = {}
    parse_args = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        seen["parser"] = self
        raise _Recorded

    argparse.ArgumentParser.parse_args = capture
    try:
        server_args.prepare_server_args(["--model-path", "x"])
    except _Recorded:
        pass
    finally:
        argparse.ArgumentParser.parse_args = parse_args
    parser = seen["parser"]
    dests = {}
    for action in parser._actions:
        dests.setdefault(action.dest, []).extend(action.option_strings)
    return {"options": sorted(o for opts in dests.values() for o in opts), "dests": dests,
            "abbrev": parser.allow_abbrev}


def _one(line, dests, server_args):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return {"status": "parsed", "values": _parse(line, dests, server_args)}
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"status": "rejected", "code": exc.code, "error": (lines or [f"exit {exc.code}"])[-1][:400]}
    except Exception as exc:  # the release raises on the line (a config file it cannot read, a bad value)
        return {"status": "rejected", "code": None, "error": f"{type(exc).__name__}: {exc}"[:400]}


def main():
    req = json.loads(sys.argv[1])
    try:
        from sglang.srt import server_args
    except BaseException as exc:  # an import that fails in any way: the parser cannot run here
        _say(status="unavailable", error=f"{type(exc).__name__}: {exc}"[:300])
        return
    if req.get("table"):
        with contextlib.redirect_stderr(io.StringIO()):
            _say(status="table", **_table(server_args))
    for line in req["lines"]:
        _say(**_one(line, req["dests"], server_args))


main()
