"""What vLLM does with a launch at start-up, read from the release's files: the environment
variables doctor reads (as ``vllm/envs.py`` declares them: its ``environment_variables`` dict of
``"NAME": lambda: os.getenv("NAME", default)`` entries, read from the syntax tree and run on a value),
which model runner the launch uses, and doctor's checks of it (``launch.runner``,
``launch.pipeline_parallel``).

vLLM has two model runners: v1 (``vllm/v1/worker/gpu_model_runner.py``) and, from 0.12.0, v2
(``vllm/v1/worker/gpu/``, ``VLLM_USE_V2_MODEL_RUNNER=1``), whose EAGLE-3 aux path exists from 0.17.0.
Which one a launch uses depends on the release (its files say which runners it ships, its envs.py
how the switch defaults, its VllmConfig which targets pick v2), the environment and the target;
tests/test_doctor.py and tests/test_drafter_release.py prove each rule on the published wheels.

Over 300 lines: the runner rule is one decision read from four files of the release (its envs.py
among them), and the two checks doctor runs on it sit beside it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher import program
from patcher.engine_specs.base import (
    DEEPSEEK_V2_MODEL_ARCHITECTURES,
    K25_TARGET,
    V1,
    V2,
    Ask,
    EnvParsed,
    EnvRules,
    EnvVar,
    LaunchContext,
    compares_to,
    contains,
    definitions,
    parse_file,
    read_once,
)
from patcher.findings import Finding, hint, ok, problem

# --- the environment variables, as envs.py declares them ------------------------------------------

ENVS_FILE = "vllm/envs.py"
V2_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"  # which model runner (below)
FLASHINFER_ALLREDUCE_ENV = "VLLM_ALLREDUCE_USE_FLASHINFER"  # the FlashInfer allreduce fusion's backend
NAMES = (V2_RUNNER_ENV, FLASHINFER_ALLREDUCE_ENV)


PLATFORM_FILE = "vllm/platforms/interface.py"


def read(site: Path) -> dict[str, EnvVar]:
    declared = dict(read_once(getenv_defaults, site / ENVS_FILE))
    out = {name: EnvVar(name, name in declared, declared.get(name)) for name in NAMES}
    if V2_RUNNER_ENV not in declared and v2_env_refused(site):
        out[V2_RUNNER_ENV] = EnvVar(V2_RUNNER_ENV, True, None, only="1")  # read by the platform's start-up check
    return out


def v2_env_refused(site: Path | None) -> bool:
    """Whether start-up refuses VLLM_USE_V2_MODEL_RUNNER set to anything but "1" (0.34.0:
    ``if env == "VLLM_USE_V2_MODEL_RUNNER": if value != "1": raise``), read from the syntax tree."""
    return site is not None and read_once(_refuses_v2_env, site / PLATFORM_FILE)


def _refuses_v2_env(path: Path) -> bool:
    tree = parse_file(path)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.If) and compares_to(node.test, V2_RUNNER_ENV, ast.Eq):
            for inner in (n for stmt in node.body for n in ast.walk(stmt)):
                if isinstance(inner, ast.If) and compares_to(inner.test, "1", ast.NotEq) \
                        and any(isinstance(n, ast.Raise) for stmt in inner.body for n in ast.walk(stmt)):
                    return True
    return False


def getenv_defaults(path: Path) -> dict[str, str | None]:
    """``{"NAME": default}`` for every entry of envs.py's ``environment_variables`` dict whose
    value reads ``os.getenv("NAME", default)`` / ``os.environ.get(...)``."""
    tree = parse_file(path)
    if tree is None:
        return {}
    out: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.isupper()):
                continue
            for call in ast.walk(value):
                if isinstance(call, ast.Call) and _is_getenv(call.func) and call.args \
                        and isinstance(call.args[0], ast.Constant) and call.args[0].value == key.value:
                    default = call.args[1] if len(call.args) > 1 else None
                    out[key.value] = (str(default.value) if isinstance(default, ast.Constant)
                                      and default.value is not None else None)
                    break
    return out


def _is_getenv(func: ast.expr) -> bool:
    # os.getenv(...) or os.environ.get(...)
    if isinstance(func, ast.Attribute) and func.attr == "getenv":
        return True
    return (isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Attribute)
            and func.value.attr == "environ")


def parse(site: Path, name: str, env: dict[str, str]) -> EnvParsed | None:
    """The envs.py entry's lambda run on ``env[name]``: a ValueError or TypeError stops start-up."""
    tree = parse_file(site / ENVS_FILE)
    if tree is None:
        return None
    ns = definitions(tree, env)
    entry = _dict_entry(tree, name)
    if entry is None or ns is None:
        return None
    how = f"{ENVS_FILE} reads it as {ast.unparse(entry)[len('lambda: '):][:80]}"
    try:
        eval(compile(ast.Expression(entry), str(site / ENVS_FILE), "eval"), ns)()
    except (ValueError, TypeError) as exc:
        return EnvParsed(how, "0 or 1", raises=f"{type(exc).__name__}: {exc}")
    except Exception:
        return None
    return EnvParsed(how, "0 or 1")


def _dict_entry(tree: ast.Module, name: str) -> ast.Lambda | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == name and isinstance(value, ast.Lambda):
                    return value
    return None


def env_true(value: str | None) -> bool:
    """vLLM reads these as ``bool(int(value))``."""
    try:
        return bool(int(value)) if value is not None else False
    except ValueError:
        return False


RULES = EnvRules(names=NAMES, read=read, parse=parse)


# --- which model runner a launch uses -------------------------------------------------------------

# The v2 GPU model runner (vllm/v1/worker/gpu/model_runner.py) hands the drafter
# aux_hidden_states=None on 0.12.0-0.16.0: an EAGLE-3 drafter gets no aux layers at all.
# 0.17.0 added set_eagle3_aux_hidden_state_layers and the aux outputs.
V2_RUNNER_EAGLE3_SINCE = Version("0.17.0")

# VLLM_USE_V2_MODEL_RUNNER unset: 0.12.0-0.21.0 read it as "0" (v1). From 0.22.0 it is tri-state and
# VllmConfig.use_v2_model_runner decides: 0.22.0-0.28.0 pick v2 only for the architectures of
# their DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (and dense models from 0.25.0), a list without
# DeepSeek-V3 or Kimi; from 0.29.0 v2 for every model (on CUDA with Triton), unless the launch
# uses a feature v2 lacks (e.g. EAGLE-3 with pipeline parallelism).
V2_RUNNER_DEFAULT_SINCE = Version("0.29.0")
KIMI_ARCHITECTURES = frozenset({"DeepseekV3ForCausalLM", K25_TARGET})
V2_ENV_TRISTATE_SINCE = Version("0.22.0")  # only where no envs.py is at hand to read the default from
# 0.29.0 lists "EAGLE3 with pipeline parallelism" among the features v2 lacks, so such a launch
# stays on v1 there; 0.30.0 dropped the entry.
V2_EAGLE3_PP_FALLBACK = SpecifierSet("==0.29.0")


@dataclass(frozen=True)
class Runner:
    name: str  # "v1" or "v2"
    why: str


# Which runners a release ships is read from its files: 0.34.0 removed the v1 runner (and
# VLLM_USE_V2_MODEL_RUNNER from envs.py). The versions below only stand in for a release whose
# files are not at hand (drafter check --engine-version).
V1_RUNNER_FILE = "vllm/v1/worker/gpu_model_runner.py"
V2_RUNNER_FILE = "vllm/v1/worker/gpu/model_runner.py"
V2_RUNNER_SINCE = Version("0.12.0")
V1_RUNNER_REMOVED = Version("0.34.0")


def vllm_runners(version: Version, site: Path | None) -> tuple[str, ...]:
    """The model runners the release ships ("v1", "v2"): its runner files, else its version."""
    if site is not None and (site / Path(V1_RUNNER_FILE).parts[0]).is_dir():  # the package is there
        return tuple(name for name, rel in (("v1", V1_RUNNER_FILE), ("v2", V2_RUNNER_FILE)) if (site / rel).is_file())
    return tuple(name for name, has in (("v1", version < V1_RUNNER_REMOVED), ("v2", version >= V2_RUNNER_SINCE))
                 if has)




VLLM_CONFIG_FILE = "vllm/config/vllm.py"
_DEFAULT_V2_LIST = "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES"


def default_v2_architectures(site: Path | None) -> frozenset[str] | None:
    """The architectures for which the release's VllmConfig.use_v2_model_runner picks v2 when
    VLLM_USE_V2_MODEL_RUNNER is unset (0.22.0-0.28.0: ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``,
    read by ``_is_default_v2_model_runner_model``), read from its syntax tree; None where the
    release has no such list in use (before 0.22.0, or v2 for every model from 0.29.0)."""
    return read_once(_default_v2_in, site / VLLM_CONFIG_FILE) if site is not None else None


def _default_v2_in(path: Path) -> frozenset[str] | None:
    tree = parse_file(path)
    if tree is None or not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                               and n.func.attr == "_is_default_v2_model_runner_model" for n in ast.walk(tree)):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == _DEFAULT_V2_LIST
                                                for t in node.targets):
            return frozenset(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return None


EAGLE3_UTILS_FILE = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
DEEPSEEK_MODEL_FILE = "vllm/model_executor/models/deepseek_v2.py"


def v2_refuses_deepseek_eagle3_pp(site: Path | None) -> bool | None:
    """Whether the release's v2 runner raises at load for EAGLE-3 with pipeline parallelism on a
    DeepSeek/Kimi target (0.30.0+): set_eagle3_aux_hidden_state_layers calls
    verify_supports_aux_hidden_states_over_pp, and the DeepSeek model never sets
    ``supports_aux_hidden_states_over_pp = True``. None: no files to read."""
    if site is None or not (site / EAGLE3_UTILS_FILE).is_file():
        return None if site is None else False
    utils = (site / EAGLE3_UTILS_FILE).read_text(encoding="utf-8", errors="replace")
    if "verify_supports_aux_hidden_states_over_pp(" not in utils:
        return False
    model = site / DEEPSEEK_MODEL_FILE
    return not (model.is_file() and "supports_aux_hidden_states_over_pp = True" in model.read_text(errors="replace"))



def vllm_runner(version: Version, env: dict[str, str], env_var: EnvVar | None,
                target_architectures: tuple[str, ...] | None, eagle3_pp: bool = False,
                runners: tuple[str, ...] = ("v1", "v2"), refuses_v2_env: bool = False,
                default_v2: frozenset[str] | None = None) -> Runner:
    """The runner the launch uses; "unknown" when it hangs on a target doctor cannot place;
    "refused" when the server does not start with this environment."""
    if not runners:
        return Runner("unknown", f"vllm {version} has neither {V1_RUNNER_FILE} nor {V2_RUNNER_FILE}: its runners "
                                 "moved, and which one a launch uses is not known")
    if "v1" not in runners:
        value = env.get(V2_RUNNER_ENV)
        if value is not None and value != "1" and refuses_v2_env:
            return Runner("refused", f"{V2_RUNNER_ENV}={value}: vllm {version} refuses it at start-up (its v1 model "
                                     "runner is removed) and the server does not start")
        return Runner("v2", f"vllm {version} ships only the v2 model runner ({V1_RUNNER_FILE} is gone)")
    if "v2" not in runners or env_var is None or not env_var.read:
        return Runner("v1", f"vllm {version} ships only the v1 model runner ({V2_RUNNER_FILE} is absent)")
    if V2_RUNNER_ENV in env:
        value = env[V2_RUNNER_ENV]
        return Runner("v2" if env_true(value) else "v1", f"{V2_RUNNER_ENV}={value}")
    if env_var.default is not None:
        return Runner("v1", f"{V2_RUNNER_ENV} is not set (default {env_var.default!r})")
    if default_v2 is not None:  # the release's own list decides (a MoE target such as DeepSeek's)
        if target_architectures is None:
            return Runner("unknown", f"{V2_RUNNER_ENV} is not set: vllm {version} picks the runner by the target's "
                                     "architecture, and doctor could not read the target's config")
        listed = sorted(set(target_architectures) & default_v2)
        if listed:
            return Runner("v2", f"{V2_RUNNER_ENV} is not set and vllm {version} picks v2 by default for {listed[0]} "
                                "(its DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES); VLLM_USE_V2_MODEL_RUNNER=0 keeps v1")
        return Runner("v1", f"{V2_RUNNER_ENV} is not set and vllm {version} picks v2 by default only for the "
                            f"architectures its DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES lists, not "
                            f"{target_architectures[0]}")
    if version >= V2_RUNNER_DEFAULT_SINCE and eagle3_pp and contains(V2_EAGLE3_PP_FALLBACK, version):
        return Runner("v1", f"vllm {version} keeps v1 for EAGLE-3 with pipeline parallelism "
                            "(a feature its v2 runner lacks)")
    if version >= V2_RUNNER_DEFAULT_SINCE:
        return Runner("v2", f"{V2_RUNNER_ENV} is not set and vllm {version} picks v2 for every model "
                            f"(VllmConfig.use_v2_model_runner); {V2_RUNNER_ENV}=0 keeps v1")
    if target_architectures is not None and KIMI_ARCHITECTURES & set(target_architectures):
        return Runner("v1", f"{V2_RUNNER_ENV} is not set and vllm {version} picks v2 by default only for "
                            "architectures other than DeepSeek-V3/Kimi")
    return Runner("unknown", f"{V2_RUNNER_ENV} is not set: vllm {version} picks the runner by the target's "
                             "architecture, and the target is not a DeepSeek-V3/Kimi config doctor could read")



# --- the rules the drafter check asks (DrafterReading.runners, .default_runner) -----------------

def shipped(ask: Ask) -> tuple[str, ...]:
    """The runners the release ships, read from its files when it is installed."""
    if ask.version is None:
        return (V1,)
    return vllm_runners(ask.version, ask.site)


def default_runner(ask: Ask, target_arch: str | None, env: dict[str, str] | None = None) -> str:
    """The runner a launch uses for this target: ``vllm_runner`` with the launch's environment (doctor's;
    None: a launch that sets no VLLM_USE_V2_MODEL_RUNNER). "unknown" when the release picks by
    architecture and the target's is not known."""
    if ask.version is None:
        return V1
    var = read(ask.site).get(V2_RUNNER_ENV) if ask.site is not None else None
    if var is None:  # no install to read: what the releases declare (unset reads as "0" before 0.22.0)
        var = EnvVar(V2_RUNNER_ENV, True, "0" if ask.version < V2_ENV_TRISTATE_SINCE else None)
    runner = vllm_runner(ask.version, env or {}, var, (target_arch,) if target_arch else None,
                         runners=shipped(ask), default_v2=default_v2_architectures(ask.site))
    return {"v2": V2, "v1": V1}.get(runner.name, "unknown")


# --- doctor's launch checks (LaunchReading.checks) -------------------------------------------------------

def launch_runner(ctx: LaunchContext) -> Runner:
    """The runner this launch uses: the release's own start-up configuration's answer where it ran
    (``VllmConfig.use_v2_model_runner`` with the launch's environment: its variable, architectures,
    the features v2 lacks, pipeline parallelism included), else the rules (``vllm_runner``)."""
    release, cmd, env, target = ctx.release, ctx.cmd, ctx.env, ctx.target
    assert release.version is not None
    runners = vllm_runners(release.version, release.site)
    asked = (ctx.startup or {}).get("runner") if (ctx.startup or {}).get("status") == "configured" else None
    if asked in ("v1", "v2") and asked in runners:
        by = (ctx.startup or {}).get("runner_by") or "its start-up configuration"
        value = f"{V2_RUNNER_ENV}={env[V2_RUNNER_ENV]}" if V2_RUNNER_ENV in env else f"{V2_RUNNER_ENV} unset"
        return Runner(asked, f"asked of {release.label()}'s start-up configuration ({by}, {value})")
    return vllm_runner(release.version, env, ctx.variables.get(V2_RUNNER_ENV),
                       target.architectures if target is not None else None,
                       eagle3_pp=cmd.drafter is not None and (cmd.pp or 1) > 1, runners=runners,
                       refuses_v2_env=v2_env_refused(release.site),
                       default_v2=default_v2_architectures(release.site))


def runner_findings(ctx: LaunchContext) -> list[Finding]:
    release, cmd, env = ctx.release, ctx.cmd, ctx.env
    assert release.version is not None
    parsed = parse(release.site, V2_RUNNER_ENV, env) if V2_RUNNER_ENV in env and release.site else None
    if parsed is not None and parsed.raises:
        return []  # the server stops at start-up on the value (env.* says so): no runner runs
    runner = launch_runner(ctx)
    if runner.name == "refused":
        return [problem("launch.runner", runner.why, wanted=f"{V2_RUNNER_ENV} unset (or 1)",
                        found=f"{V2_RUNNER_ENV}={env.get(V2_RUNNER_ENV)}", hint=f"unset {V2_RUNNER_ENV}")]
    if runner.name == "v2" and cmd.drafter is not None and release.version < V2_RUNNER_EAGLE3_SINCE:
        return [problem("launch.runner",
                        f"the v2 model runner ({runner.why}) hands an EAGLE-3 drafter no aux hidden states on "
                        f"{release.label()}: it runs on the last layer alone",
                        wanted="the v1 runner", found=f"v2 ({runner.why})",
                        hint=f"unset {V2_RUNNER_ENV}, or use vllm {V2_RUNNER_EAGLE3_SINCE} or newer")]
    if runner.name == "unknown":
        what = (f"file an issue with '{program.command('verify --json')}'" if "moved" in runner.why else
                "put the target's local folder in the command")
        return [hint("launch.runner", runner.why, hint=what)]
    out = [ok("launch.runner", f"the {runner.name} model runner: {runner.why}")]
    return out + _eagle3_pp_findings(ctx, runner)


def _eagle3_pp_findings(ctx: LaunchContext, runner: Runner) -> list[Finding]:
    """EAGLE-3 with pipeline parallelism on the v2 runner: a DeepSeek/Kimi target raises at load."""
    release, cmd, target = ctx.release, ctx.cmd, ctx.target
    if runner.name != "v2" or cmd.drafter is None or (cmd.pp or 1) < 2 \
            or not v2_refuses_deepseek_eagle3_pp(release.site):
        return []
    archs = set(target.architectures) if target is not None else set()
    keep_v1 = ("; VLLM_USE_V2_MODEL_RUNNER=0 keeps the v1 runner" if "v1" in vllm_runners(
        release.version, release.site) else "") if release.version is not None else ""
    what = (f"{release.label()}'s v2 model runner raises at load for EAGLE-3 with pipeline parallelism on a "
            "DeepSeek/Kimi target: its DeepSeek model does not relay aux hidden states between pipeline stages "
            "(verify_supports_aux_hidden_states_over_pp)")
    if archs & DEEPSEEK_V2_MODEL_ARCHITECTURES:
        return [problem("launch.pipeline_parallel", what, wanted="pipeline parallel size 1 with EAGLE-3",
                        found=f"{cmd.pp} stages, {sorted(archs)[0]}", hint=f"use tensor parallelism alone{keep_v1}")]
    return [hint("launch.pipeline_parallel", what + "; whether this target is one was not read",
                 hint="put the target's local folder in the command")]
