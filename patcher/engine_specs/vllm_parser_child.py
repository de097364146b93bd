"""Sent whole to the engine's interpreter (``python -c``): vLLM's own parser reads a server command.

Builds the parser exactly as ``vllm serve`` does (``ServeSubcommand.subparser_init`` on a
``FlexibleArgumentParser``: its option table, prefixes, ``--config`` files, dotted and
underscore forms, ``-sc`` and the ``--spec-*`` aliases where the release has them), or as
``python -m vllm.entrypoints.openai.api_server`` does (``make_arg_parser``), parses the argv,
and lets the release merge its speculative options (``EngineArgs.create_speculative_config`` on
the parsed namespace, with ``SpeculativeConfig`` replaced by a recorder: the real one needs the
target's config). Nothing is started. Prints one line per command line asked (several share
one import): the marker, then JSON.

Standard library and the engine only: it runs inside the engine's environment.
"""

import contextlib
import inspect
import io
import json
import re
import sys

MARK = "@@kimi-patcher-parse@@ "


class _Recorded(Exception):
    pass


def _say(**result):
    print(MARK + json.dumps(result, default=str), flush=True)


def _cpu_platform_where_none():
    """Building the parser asks the platform for a device (DeviceConfig's default); a host without
    a GPU (a build stage, CI) has none. vLLM's own CLI swaps in the CPU platform there for
    ``vllm bench``; the same here changes device defaults only, none of the options doctor reads."""
    from vllm import platforms

    unspecified = getattr(platforms.current_platform, "is_unspecified", lambda: False)
    if unspecified():
        from vllm.platforms.cpu import CpuPlatform

        platforms.current_platform = CpuPlatform()


def _serve_parser(entry):
    import vllm.entrypoints.cli.serve as serve  # the serve subcommand: its parser and make_arg_parser

    _cpu_platform_where_none()
    flexible = serve.FlexibleArgumentParser
    if entry == "serve":
        top = flexible(prog="vllm")
        return top, serve.ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
    parser = serve.make_arg_parser(flexible())
    return parser, parser


def _parse(line):
    from vllm.engine import arg_utils

    top, _ = _serve_parser(line["entry"])
    if line["entry"] == "serve":
        args = top.parse_args(["serve", *line["argv"]])  # the top parser moves --model to the front
        if getattr(args, "model_tag", None) is not None:  # ServeSubcommand.cmd: the positional model wins
            args.model = args.model_tag
    else:
        args = top.parse_args(line["argv"])
    recorded = {}

    def record(**kwargs):
        recorded.update(kwargs)
        raise _Recorded

    # EngineArgs.create_speculative_config run on the parsed namespace itself: the release's own
    # merge of --spec-* into --speculative-config (and its refusals), without building EngineArgs,
    # whose __post_init__ asks the platform for a device (none on a CPU-only build host).
    real = arg_utils.SpeculativeConfig  # the parser of the next line is built from the real one
    arg_utils.SpeculativeConfig = record
    create = arg_utils.EngineArgs.create_speculative_config
    params = list(inspect.signature(create).parameters)[1:]
    speculative = None
    try:
        create(args, *[None] * len(params))
    except _Recorded:
        speculative = {k: v for k, v in recorded.items() if not k.startswith("target_")}
    finally:
        arg_utils.SpeculativeConfig = real
    return {
        "model": args.model,
        "tensor_parallel_size": args.tensor_parallel_size,
        "pipeline_parallel_size": args.pipeline_parallel_size,
        "speculative_config": speculative,
    }


def _table(entry):
    """Every option string of the serve parser, and the ones of each dest (tests generate spellings)."""
    _, parser = _serve_parser(entry)
    dests = {}
    for action in parser._actions:
        dests.setdefault(action.dest, []).extend(action.option_strings)
    return {"options": sorted(o for opts in dests.values() for o in opts), "dests": dests,
            "abbrev": parser.allow_abbrev}


def _one(line):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return {"status": "parsed", "values": _parse(line)}
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"status": "rejected", "code": exc.code, "error": _plain((lines or [f"exit {exc.code}"])[-1])}
    except Exception as exc:  # the release raises on the line (mutually exclusive options, a bad value)
        return {"status": "rejected", "code": None, "error": _plain(f"{type(exc).__name__}: {exc}")}


def _plain(text):
    """Without memory addresses (``<function loads at 0x7f...>``): the same line reads the same."""
    return re.sub(r" at 0x[0-9a-f]+", "", text)[:400]


def main():
    req = json.loads(sys.argv[1])
    try:
        import vllm.engine.arg_utils  # noqa: F401
        import vllm.entrypoints.cli.serve  # noqa: F401
    except BaseException as exc:  # an import that fails in any way: the parser cannot run here
        _say(status="unavailable", error=f"{type(exc).__name__}: {exc}"[:300])
        return
    if req.get("table"):
        with contextlib.redirect_stderr(io.StringIO()):
            _say(status="table", **_table(req["table"]))
    for line in req["lines"]:
        _say(**_one(line))


main()
