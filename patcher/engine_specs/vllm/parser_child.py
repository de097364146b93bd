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

import copy
import inspect
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sent after parser_child_common.py, which defines them
    from patcher.engine_specs.parser_child_common import Recorded, launch_environ, option_table, plain, run


def _cpu_platform_where_none():
    """Building the parser asks the platform for a device (DeviceConfig's default); a host without
    a GPU (a build stage, CI) has none. vLLM's own CLI swaps in the CPU platform there for
    ``vllm bench``; the same here changes device defaults only, none of the options doctor reads.
    Done after the imports (during them, a CPU platform has vLLM import its CPU kernels, which
    fails on 0.17 with torch 2.13), so the modules that bound the old platform when imported
    (arg_utils and the config modules the start-up runs) are pointed at the new one too."""
    import sys

    from vllm import platforms

    # The class's own method: before 0.11 a Platform's __getattr__ answers None for what it lacks.
    current = platforms.current_platform
    unspecified = getattr(type(current), "is_unspecified", None)
    if unspecified(current) if callable(unspecified) else type(current).__name__ == "UnspecifiedPlatform":
        from vllm.platforms.cpu import CpuPlatform

        cpu = platforms.current_platform = CpuPlatform()
        for name, module in list(sys.modules.items()):
            if name.startswith("vllm") and getattr(module, "current_platform", None) is current:
                module.current_platform = cpu


def _serve_parser(entry):
    import vllm.entrypoints.cli.serve as serve  # the serve subcommand: its parser and make_arg_parser

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
    as_parsed = copy.deepcopy(args)  # the merge writes into the namespace: start-up reads it as parsed
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
    with launch_environ(line):  # VLLM_* assignments of the command reach the start-up code
        startup = _startup(as_parsed)  # ~2 s for the first line (imports), ~10 ms for each next
    model = args.model
    if startup.get("status") == "configured" and startup.get("method"):
        # What the release inferred is what doctor judges (issue 53): the method of a config without
        # one, and a speculators drafter served as the model (its verifier becomes the target).
        given = speculative is not None
        speculative = dict(speculative or {})
        for key, got in (("method", "method"), ("model", "draft"), ("num_speculative_tokens", "tokens")):
            if speculative.get(key) is None and startup.get(got) is not None:
                speculative[key] = startup[got]
        if not given and startup.get("target"):
            model = startup["target"]
    return {
        "model": model,
        "tensor_parallel_size": args.tensor_parallel_size,
        "pipeline_parallel_size": args.pipeline_parallel_size,
        "speculative_config": speculative,
        "_startup": startup,
    }


def _startup(args):
    """The release's own start-up configuration of the parsed line (``EngineArgs.create_engine_config``,
    issue 53): its checks of the speculative config (missing or zero tokens, a draft TP it refuses, an
    unknown key), what it infers (the method from the draft's config, a speculators drafter served as
    the model), before any device or weight. Stand-ins, a build host having no GPU: the platform's
    ``check_and_update_config`` (the device's own choice of kernels, backends and graphs) is not run,
    and Triton is present (``_with_triton``)."""
    from vllm import platforms
    from vllm.engine import arg_utils

    platform = platforms.current_platform
    saved = platform.__dict__.get("check_and_update_config")
    platform.check_and_update_config = lambda *a, **k: None
    triton = _with_triton()
    try:
        config = arg_utils.EngineArgs.from_cli_args(args).create_engine_config()
    except (ValueError, TypeError) as exc:  # the release's own refusal (pydantic's ValidationError included)
        errors = getattr(exc, "errors", None)
        text = "; ".join(_said(e) for e in errors()) if callable(errors) else str(exc)
        return {"status": "refused", "error": plain(f"{type(exc).__name__}: {text}")}
    except Exception as exc:  # a model it cannot read here (a Hub id offline), a device it asks for
        return {"status": "unavailable", "error": plain(f"{type(exc).__name__}: {exc}")}
    finally:
        if saved is None:
            platform.__dict__.pop("check_and_update_config", None)
        else:
            platform.check_and_update_config = saved
        for module in triton:
            module.HAS_TRITON = False
    spec = config.speculative_config
    draft = getattr(spec, "draft_model_config", None) if spec is not None else None
    return {"status": "configured", "target": config.model_config.model,
            "method": getattr(spec, "method", None), "draft": getattr(draft, "model", None),
            "tokens": getattr(spec, "num_speculative_tokens", None),
            "draft_tp": getattr(spec, "draft_tensor_parallel_size", None), **_runner(config)}


def _with_triton():
    """Triton present while the start-up runs, as on the GPU host (vLLM's CUDA wheels require it; a
    build host may lack it, and from 0.25.0 the start-up then refuses VLLM_USE_V2_MODEL_RUNNER=1:
    "Model Runner V2 requires Triton"). Returns the modules whose ``HAS_TRITON`` was set."""
    import sys

    changed = [m for name, m in list(sys.modules.items()) if name.startswith("vllm.") and m is not None
               and m.__dict__.get("HAS_TRITON") is False]
    for module in changed:
        module.HAS_TRITON = True
    return changed


def _runner(config):
    """The model runner the release picks for this configuration: ``VllmConfig.use_v2_model_runner``
    (from 0.22.0: the variable, else its architectures, the features v2 lacks, a draft method only v2
    runs), read with Triton present, as on the GPU host (vLLM's CUDA wheels require it; a build host
    may lack it, and the release would then pick v1 for that reason alone). Before the property, the
    variable decides alone (``envs.VLLM_USE_V2_MODEL_RUNNER``). Empty where neither exists."""
    from vllm import envs

    prop = getattr(type(config), "use_v2_model_runner", None)
    if isinstance(prop, property):
        triton = _with_triton()
        try:
            v2 = bool(config.use_v2_model_runner)
        except Exception as exc:  # the release refuses the combination (0.25+: _validate_v2_model_runner)
            return {"runner_error": plain(f"{type(exc).__name__}: {exc}")}
        finally:
            for module in triton:
                module.HAS_TRITON = False
        return {"runner": "v2" if v2 else "v1", "runner_by": "VllmConfig.use_v2_model_runner"}
    try:
        value = envs.VLLM_USE_V2_MODEL_RUNNER
    except AttributeError:
        return {}
    return {"runner": "v2" if value else "v1", "runner_by": "VLLM_USE_V2_MODEL_RUNNER"}


def _said(error):
    """One of pydantic's errors as it names it: where (a key it does not take), then what."""
    where = ".".join(str(part) for part in error.get("loc") or ())
    return f"{where}: {error.get('msg')}" if where else str(error.get("msg"))


def table(entry, loaded):
    """Every option string of the serve parser, and the ones of each dest (tests generate spellings)."""
    _, parser = _serve_parser(entry)
    return option_table(parser)


def load():
    import vllm.engine.arg_utils  # noqa: F401
    import vllm.entrypoints.cli.serve  # noqa: F401

    _cpu_platform_where_none()


run(load, parse, table)
