"""Check the speculative-decoding part of a server launch line against the drafter.

The expensive mistake: ``--speculative-algorithm EAGLE`` with an EAGLE-3 drafter. The
server starts, captures no aux hidden states, feeds the drafter the last layer's 7168
features, and because 7168 == 7168 SGLang skips ``fc`` without a word. Here the line is split
and its options read with each owner's spellings; what a line means is the engine module's
judgement (``LaunchReading.flag_check``).
"""

from __future__ import annotations

import shlex
from itertools import chain
from pathlib import Path

from patcher import engine_specs
from patcher.engine_specs.base import EngineSpec
from patcher.errors import DrafterInputError
from patcher.findings import Finding, hint
from patcher.release.launch_command import option_values


def _owner(flag: str) -> str:
    """The engine whose parser has the option (its method option, or one it spells); only the engines
    that state how their lines are read have options we know."""
    return next(s.name for s, launch in engine_specs.LAUNCH_READERS
                if flag == launch.method_option[0] or any(flag in v for v in launch.spellings.values()))


def flag_values(argv: list[str], flag: str) -> list[str]:
    # Every option is read with its owner's spellings, whichever engine the line is checked for:
    # `--speculative_config` on an SGLang line is still vLLM's flag, named as such.
    return option_values(argv, _owner(flag), flag)


def guess_engine(flags: str) -> EngineSpec | None:
    """The engine whose method option the line gives (vLLM's --speculative-config, SGLang's
    --speculative-algorithm), in engine_specs.ALL's order; None: neither."""
    argv = split_flags(flags)
    return next((s for s, launch in engine_specs.LAUNCH_READERS if flag_values(argv, launch.method_option[0])), None)


def split_flags(flags: str) -> list[str]:
    try:
        return shlex.split(flags)
    except ValueError as exc:
        raise DrafterInputError("--flags cannot be split like a shell line", wanted="balanced quotes",
                                found=str(exc),
                                hint="""quote the whole line: --flags "--speculative-config '{...}'\"""") from None


def check_flags(flags: str, spec: EngineSpec, drafter: Path, speculators_config: bool) -> list[Finding]:
    argv = split_flags(flags)
    if spec.launch is None or spec.launch.flag_check is None:
        return [hint("flags.engine", f"patcher has no reader of {spec.title}'s speculative flags: --flags is not "
                     "checked", found=flags[:80])]
    # Every option any engine spells, read once: the engine's check reads values, it calls nothing back.
    known = {o for _, launch in engine_specs.LAUNCH_READERS
             for o in (launch.method_option[0], *chain(*launch.spellings.values()))}
    return spec.launch.flag_check({o: flag_values(argv, o) for o in sorted(known)}, drafter, speculators_config)
