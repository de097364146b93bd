"""Sent whole to the engine's interpreter (``python -c``): vLLM's own parser reads a server command.

Builds the parser exactly as ``vllm serve`` does (``ServeSubcommand.subparser_init`` on a
``FlexibleArgumentParser``: its option table, prefixes, ``--config`` files, dotted and
underscore forms, ``-sc`` and the ``--spec-*`` aliases where the release has them), or as
``python -m vllm.entrypoints.openai.api_server`` does (``make_arg_parser``), parses the argv,
and lets the release merge its speculative options (``EngineArgs.create_speculative_config`` on
the parsed namespace, with ``SpeculativeConfig`` replaced by a recorder: the real one needs the
target's config). Nothing is started. Prints one line per command line asked (several share
one import): the marker, then JSON.

Sent after parser_child_common.py, whose names it uses (Recorded, run).
"""

import inspect
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sent after parser_child_common.py, which defines them
    from patcher.engine_specs.parser_child_common import Recorded, option_table, run


def _cpu_platform_where_none():
    """Building the parser asks the platform for a device (DeviceConfig's default); a host without
    a GPU (a build stage, CI) has none. vLLM's own CLI swaps in the CPU platform there for
    ``vllm bench``; the same here changes device defaults only, none of the options doctor reads."""
    from vllm import platforms

    # The class's own method: before 0.11 a Platform's __getattr__ answers None for what it lacks.
    current = platforms.current_platform
    unspecified = getattr(type(current), "is_unspecified", None)
    if unspecified(current) if callable(unspecified) else type(current).__name__ == "UnspecifiedPlatform":
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


def parse(line, dests, loaded):
    from vllm.engine import arg_utils

    top, _ = _serve_parser(line["entry"])
    if line["entry"] == "serve":
        args = top.parse_args(["serve", *line["argv"]])  # the top parser moves --model to the front
        if getattr(args, "model_tag", None) is not None:  # ServeSubcommand.cmd: the positional model wins
            args.model = args.model_tag
    else:
        args = top.parse_args(line["argv"])
    recorded = {}

    class Record:  # SpeculativeConfig(**kw) from 0.10.1; SpeculativeConfig.from_dict(kw) in 0.10.0
        def __call__(self, **kwargs):
            recorded.update(kwargs)
            raise Recorded

        def from_dict(self, kwargs):
            self(**kwargs)

    # EngineArgs.create_speculative_config run on the parsed namespace itself: the release's own
    # merge of --spec-* into --speculative-config (and its refusals), without building EngineArgs,
    # whose __post_init__ asks the platform for a device (none on a CPU-only build host).
    real = arg_utils.SpeculativeConfig  # the parser of the next line is built from the real one
    arg_utils.SpeculativeConfig = Record()
    create = arg_utils.EngineArgs.create_speculative_config
    params = list(inspect.signature(create).parameters)[1:]
    speculative = None
    try:
        create(args, *[None] * len(params))
    except Recorded:
        # What the function adds from its own parameters (the target's configs; 0.10.0 also
        # enable_chunked_prefill, disable_log_stats) is not of the line.
        speculative = {k: v for k, v in recorded.items() if k not in params}
    finally:
        arg_utils.SpeculativeConfig = real
    return {
        "model": args.model,
        "tensor_parallel_size": args.tensor_parallel_size,
        "pipeline_parallel_size": args.pipeline_parallel_size,
        "speculative_config": speculative,
    }


def table(entry, loaded):
    """Every option string of the serve parser, and the ones of each dest (tests generate spellings)."""
    _, parser = _serve_parser(entry)
    return option_table(parser)


def load():
    import vllm.engine.arg_utils  # noqa: F401
    import vllm.entrypoints.cli.serve  # noqa: F401


run(load, parse, table)
