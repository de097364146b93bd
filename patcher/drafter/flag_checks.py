"""Check the speculative-decoding part of a server launch line against the drafter.

The expensive mistake: ``--speculative-algorithm EAGLE`` with an EAGLE-3 drafter. The
server starts, captures no aux hidden states, feeds the drafter the last layer's 7168
features, and because 7168 == 7168 SGLang skips ``fc`` without a word.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from patcher import engine_specs
from patcher.drafter.findings import Finding, hint, ok, problem
from patcher.errors import DrafterInputError
from patcher.release.launch_command import option_values


def _owner(flag: str) -> str:
    """The engine whose parser has the option (its method option, or one it spells)."""
    return next(s.name for s in engine_specs.ALL
                if flag == s.launch.method_option[0] or any(flag in v for v in s.launch.spellings.values()))


def flag_values(argv: list[str], flag: str) -> list[str]:
    # Every option is read with its owner's spellings, whichever engine the line is checked for:
    # `--speculative_config` on an SGLang line is still vLLM's flag, named as such.
    return option_values(argv, _owner(flag), flag)


def guess_engine(flags: str) -> str | None:
    """The engine whose method option the line gives (vLLM's --speculative-config, SGLang's
    --speculative-algorithm), in engine_specs.ALL's order; None: neither."""
    argv = split_flags(flags)
    return next((s.name for s in engine_specs.ALL if flag_values(argv, s.launch.method_option[0])), None)


def split_flags(flags: str) -> list[str]:
    try:
        return shlex.split(flags)
    except ValueError as exc:
        raise DrafterInputError("--flags cannot be split like a shell line", wanted="balanced quotes",
                                found=str(exc),
                                hint="""quote the whole line: --flags "--speculative-config '{...}'\"""") from None


def _same_path(a: str, b: Path) -> bool:
    try:
        return Path(a).expanduser().resolve() == b.resolve()
    except OSError:
        return False


def check_flags(flags: str, engine: str, drafter: Path, speculators_config: bool) -> list[Finding]:
    argv = split_flags(flags)
    launch = engine_specs.spec(engine).launch
    return FLAG_CHECKS[launch.method_option[0]](argv, drafter, speculators_config, launch.eagle3_flags)


def _other_draft_path(where: str, named: str, drafter: Path) -> Finding:
    # Every other finding is about the folder checked; a launch that loads another drafter
    # runs something this check never saw, so its verdict says nothing about that launch.
    return problem("flags.draft_path", f"{where} names another drafter than the folder checked: the findings "
                   "here are not about the drafter this launch loads",
                   wanted=str(drafter), found=named,
                   hint="check the folder the launch names, or point the launch at the folder checked")


def _check_sglang(argv: list[str], drafter: Path, speculators_config: bool, want: str) -> list[Finding]:
    out: list[Finding] = []
    if flag_values(argv, "--speculative-config"):
        out.append(problem("flags.engine", "--speculative-config is a vLLM flag; SGLang does not take it",
                           wanted=want, found="--speculative-config"))
    algos = flag_values(argv, "--speculative-algorithm")
    if not algos:
        out.append(problem("flags.algorithm", "no --speculative-algorithm: SGLang will not use the drafter",
                           wanted=want, found="(absent)"))
    elif algos[-1].upper() == "EAGLE3":
        out.append(ok("flags.algorithm", "--speculative-algorithm EAGLE3 matches the EAGLE-3 drafter"))
    elif algos[-1].upper() == "EAGLE":
        out.append(problem(
            "flags.algorithm",
            "--speculative-algorithm EAGLE runs this EAGLE-3 drafter without its aux features: the server "
            "starts (warning only about DeepSeek MTP), the target captures nothing, fc is never applied, d2t is "
            "never read and the drafter's lm_head is the target's",
            wanted=want, found=f"--speculative-algorithm {algos[-1]}"))
    else:
        out.append(problem("flags.algorithm", f"--speculative-algorithm {algos[-1]} does not run an EAGLE-3 drafter",
                           wanted=want, found=f"--speculative-algorithm {algos[-1]}"))
    paths = flag_values(argv, "--speculative-draft-model-path")
    if paths and not _same_path(paths[-1], drafter):
        out.append(_other_draft_path("--speculative-draft-model-path", paths[-1], drafter))
    return out


def _check_vllm(argv: list[str], drafter: Path, speculators_config: bool, want: str) -> list[Finding]:
    out: list[Finding] = []
    if flag_values(argv, "--speculative-algorithm"):
        out.append(problem("flags.engine", "--speculative-algorithm is an SGLang flag; vLLM does not take it",
                           wanted=want, found="--speculative-algorithm"))
    configs = flag_values(argv, "--speculative-config")
    if not configs:
        out.append(problem("flags.algorithm", "no --speculative-config: vLLM will not use the drafter",
                           wanted=want, found="(absent)"))
        return out
    try:
        spec = json.loads(configs[-1])
    except ValueError as exc:
        out.append(problem("flags.speculative_config", "--speculative-config is not valid JSON; vLLM will not start",
                           wanted=want, found=f"{configs[-1][:80]} ({exc})"))
        return out
    if not isinstance(spec, dict):
        out.append(problem("flags.speculative_config", "--speculative-config is not a JSON object",
                           wanted=want, found=configs[-1][:80]))
        return out
    method = spec.get("method")
    if method == "eagle3":
        out.append(ok("flags.algorithm", '"method": "eagle3" matches the EAGLE-3 drafter'))
    elif method is None and speculators_config:
        out.append(hint("flags.algorithm", "no \"method\": vLLM takes it from the speculators config; "
                        "stating it keeps the launch line independent of the config format",
                        wanted='"method": "eagle3"'))
    elif method is None:
        out.append(problem("flags.algorithm", "no \"method\" in --speculative-config: vLLM guesses it from the "
                           "drafter's folder name",
                           wanted='"method": "eagle3"', found=configs[-1][:80]))
    elif method == "eagle":
        out.append(problem(
            "flags.algorithm",
            '"method": "eagle" runs this EAGLE-3 drafter as EAGLE-1: no aux hidden states reach fc',
            wanted='"method": "eagle3"', found=f'"method": "{method}"'))
    else:
        out.append(problem("flags.algorithm", f'"method": "{method}" does not run an EAGLE-3 drafter',
                           wanted='"method": "eagle3"', found=f'"method": "{method}"'))
    model = spec.get("model")
    if isinstance(model, str) and not _same_path(model, drafter):
        out.append(_other_draft_path('"model" in --speculative-config', model, drafter))
    return out


# Each engine's launch flags, checked by the option that names its speculative method
# (engine_specs.<engine>.SPEC.launch.method_option).
FLAG_CHECKS = {"--speculative-algorithm": _check_sglang, "--speculative-config": _check_vllm}
