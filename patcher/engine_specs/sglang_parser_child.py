"""Sent whole to the engine's interpreter (``python -c``): SGLang's own parser reads a server command.

Calls the release's ``prepare_server_args`` (what ``python -m sglang.launch_server`` and
``sglang serve`` call: its option table, argparse's prefixes, the ``--config`` file merge where
the release has it, ``from_cli_args``' mapping onto the fields) with ``ServerArgs.__post_init__``
replaced by a recorder, so the fields are read and the GPU and model checks never run. Prints one
line: the marker, then JSON with the values of the options doctor reads.

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


def _parse(req, server_args):
    dests = req["dests"]
    recorded = {}

    def record(self, *args, **kwargs):
        recorded.update({d: getattr(self, d) for d in dests if hasattr(self, d)})
        raise _Recorded

    # The fields as ServerArgs.from_cli_args hands them to the record (its own mapping, e.g.
    # --tensor-parallel-size onto tp_size), before __post_init__'s GPU and model checks. From
    # 0.5.20 the record is a msgspec Struct that resolves nothing at construction (its
    # __post_init__ is fixed when the class is made): the returned record is read instead.
    server_args.ServerArgs.__post_init__ = record
    try:
        made = server_args.prepare_server_args(list(req["argv"]))
        recorded.update({d: getattr(made, d) for d in dests if hasattr(made, d)})
    except _Recorded:
        pass
    return recorded


def main():
    req = json.loads(sys.argv[1])
    try:
        from sglang.srt import server_args
    except BaseException as exc:  # an import that fails in any way: the parser cannot run here
        _say(status="unavailable", error=f"{type(exc).__name__}: {exc}"[:300])
        return
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            values = _parse(req, server_args)
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        _say(status="rejected", code=exc.code, error=(lines or ["exit " + str(exc.code)])[-1][:400])
        return
    except Exception as exc:  # the release raises on the line (a config file it cannot read, a bad value)
        _say(status="rejected", code=None, error=f"{type(exc).__name__}: {exc}"[:400])
        return
    _say(status="parsed", values=values)


main()
