"""Sent whole to the engine's interpreter (``python -c``): SGLang's own parser reads a server command.

Calls the release's ``prepare_server_args`` (what ``python -m sglang.launch_server`` and
``sglang serve`` call: its option table, argparse's prefixes, the ``--config`` file merge where
the release has it, ``from_cli_args``' mapping onto the fields) with ``ServerArgs.__post_init__``
replaced by a recorder, so the fields are read and the GPU and model checks never run. Prints one
line per command line asked (several share one import): the marker, then JSON with the values
of the options doctor reads.

Sent after parser_child_common.py, whose names it uses (Recorded, run).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sent after parser_child_common.py, which defines them
    from patcher.engine_specs.parser_child_common import Recorded, option_table, run


def parse(line, dests, server_args):
    recorded = {}

    def record(self, *args, **kwargs):
        recorded.update({d: getattr(self, d) for d in dests if hasattr(self, d)})
        raise Recorded

    # The fields as ServerArgs.from_cli_args hands them to the record (its own mapping, e.g.
    # --tensor-parallel-size onto tp_size), before __post_init__'s GPU and model checks. From
    # 0.5.20 the record is a msgspec Struct that resolves nothing at construction (its
    # __post_init__ is fixed when the class is made): the returned record is read instead.
    real = server_args.ServerArgs.__dict__.get("__post_init__")
    server_args.ServerArgs.__post_init__ = record
    try:
        made = server_args.prepare_server_args(list(line["argv"]))
        recorded.update({d: getattr(made, d) for d in dests if hasattr(made, d)})
    except Recorded:
        pass
    finally:
        if real is not None:
            server_args.ServerArgs.__post_init__ = real
    return recorded


def table(entry, server_args):
    """Every option string of the parser prepare_server_args builds, and the ones of each dest."""
    import argparse

    seen = {}
    parse_args = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        seen["parser"] = self
        raise Recorded

    argparse.ArgumentParser.parse_args = capture
    try:
        server_args.prepare_server_args(["--model-path", "x"])
    except Recorded:
        pass
    finally:
        argparse.ArgumentParser.parse_args = parse_args
    parser = seen["parser"]
    return option_table(parser)


def load():
    from sglang.srt import server_args

    return server_args


run(load, parse, table)
