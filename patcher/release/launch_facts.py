"""What an engine release does with a whole launch command, beyond the drafter and the families.

Two kinds of facts, each from one place:
- the environment variables a release reads and their defaults come from the install's own
  ``vllm/envs.py`` / ``sglang/srt/environ.py`` (parsed, never imported), so a release newer than
  our tables is read as it is;
- behaviour that depends on a release's code (which model runner vLLM picks, whether its v2
  runner feeds an EAGLE-3 drafter, SGLang's fused-allreduce capture) lives in the constants
  below, and only here; tests/test_doctor.py proves every one against the published wheels.
The SGLang capture-before-fusion bug is judged by the state of its family
(``sglang/eagle3-fused-allreduce-capture``) once the catalogue has it: applied or upstream
means the capture reads the reduced residual.

Over 300 lines: every fact doctor reads from a release's files about the whole launch (env
declarations, runners, defaults), each beside the code that reads it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher.core.manifest import contains
from patcher.engine_specs.description import EngineSpec

# vLLM ------------------------------------------------------------------------------------------
V2_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"
FLASHINFER_ALLREDUCE_ENV = "VLLM_ALLREDUCE_USE_FLASHINFER"

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
V2_ENV_TRISTATE_SINCE = Version("0.22.0")  # only where no envs.py is at hand to read the default from
KIMI_ARCHITECTURES = frozenset({"DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"})
# 0.29.0 lists "EAGLE3 with pipeline parallelism" among the features v2 lacks, so such a launch
# stays on v1 there; 0.30.0 dropped the entry.
V2_EAGLE3_PP_FALLBACK = SpecifierSet("==0.29.0")

# SGLang ----------------------------------------------------------------------------------------
# The speculative worker: EAGLEWorkerV2 (overlap scheduling) when on; declared in sglang/srt/environ.py
# from 0.5.4.post1, on by default from 0.5.11, removed in 0.5.14 (the V2 worker always runs).
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"
FUSED_CAPTURE_FAMILY = "eagle3-fused-allreduce-capture"
# With the FlashInfer allreduce fusion on, the DeepSeek layers captured hidden_states + residual
# before the fused allreduce (per-rank partial sums) on these releases; fixed upstream in
# sgl-project/sglang#28343 (0.5.14). Used only while the catalogue has no family for it.
FUSED_CAPTURE_BUG = SpecifierSet(">=0.5.4.post2,<0.5.14")
FUSION_ENABLE_FLAG = "--enable-flashinfer-allreduce-fusion"
FUSION_DISABLE_FLAG = "--enforce-disable-flashinfer-allreduce-fusion"
# The flag exists in 0.5.10-0.5.13.post1; 0.5.14 replaced the switches by
# --flashinfer-allreduce-fusion-backend (and fixed the capture), so there it stops argparse.
FUSION_DISABLE_FLAG_RELEASES = SpecifierSet(">=0.5.10,<0.5.14")
FUSION_DISABLE_FLAG_SINCE = Version("0.5.10")
# Every release's auto-enable (ServerArgs._handle_model_specific_adjustments) requires it off.
DP_ATTENTION_FLAG = "--enable-dp-attention"
# Which targets SGLang turns the fusion on for by itself (TP > 1, one node, no DP attention), and
# on which GPUs: DeepSeek-V3 on SM100 in the DeepseekV3 block up to 0.5.6.post2, then in the
# shared list with SM90 from 0.5.7; KimiK25ForConditionalGeneration joins that list in 0.5.9.
_AUTO_FUSION: dict[str, tuple[tuple[Version, str], ...]] = {
    "DeepseekV3ForCausalLM": ((Version("0.5.7"), "SM90/SM100"), (Version("0"), "SM100")),
    "KimiK25ForConditionalGeneration": ((Version("0.5.9"), "SM90/SM100"),),
}


# With --enable-two-batch-overlap, DeepseekV2Model.forward runs the layers from
# first_k_dense_replace on (1 on Kimi, 3 on DeepSeek-V3) in a path that captures no EAGLE-3 aux
# states. No release supports it: the family refuses it on 0.5.4.post2-0.5.16 when the capture
# layers are set, 0.5.17+ fail at the first overlapped forward (the family's upstream entry).
TBO_CAPTURE_FAMILY = "eagle3-tbo-capture-refusal"
TBO_FLAG = "--enable-two-batch-overlap"
# The targets whose EAGLE-3 capture is DeepseekV2ForCausalLM's (the K2.5 wrapper delegates to it).
DEEPSEEK_V2_MODEL_ARCHITECTURES = KIMI_ARCHITECTURES | {"DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM"}


def fused_capture_bug_by_version(version: Version) -> bool:
    return contains(FUSED_CAPTURE_BUG, version)


def auto_fusion_gpus(version: Version, architecture: str) -> str | None:
    """The GPUs on which SGLang turns the allreduce fusion on by itself for this target; None: never."""
    return next((gpus for since, gpus in _AUTO_FUSION.get(architecture, ()) if version >= since), None)


def has_fusion_disable_flag(version: Version) -> bool:
    return contains(FUSION_DISABLE_FLAG_RELEASES, version)


# Environment variables, read from the install --------------------------------------------------

@dataclass(frozen=True)
class EnvVar:
    name: str
    read: bool  # whether this release reads it at all
    default: str | None  # as written in envs.py (os.getenv's second argument)
    only: str | None = None  # start-up refuses every other value (VLLM_USE_V2_MODEL_RUNNER on 0.34.0: "1")


def env_vars(spec: EngineSpec, site: Path | None) -> dict[str, EnvVar]:
    """The variables doctor cares about, as the install's envs.py / environ.py declares them."""
    declarations = spec.env_declarations
    if site is None or declarations is None:
        return {}
    path, style = declarations
    declared = {"getenv": _getenv_defaults, "environ": _environ_defaults}[style](site / path)
    names = spec.env_vars
    out = {name: EnvVar(name, name in declared, declared.get(name)) for name in names}
    if V2_RUNNER_ENV in names and V2_RUNNER_ENV not in declared and v2_env_refused(site):
        out[V2_RUNNER_ENV] = EnvVar(V2_RUNNER_ENV, True, None, only="1")  # read by the platform's start-up check
    return out


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _environ_defaults(path: Path) -> dict[str, str | None]:
    """``{"NAME": default}`` for SGLang's ``class Envs: NAME = EnvBool(default)`` declarations."""
    tree = _parse(path)
    out: dict[str, str | None] = {}
    for cls in (n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == "Envs"):
        for node in cls.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Call) and node.targets[0].id.startswith("SGLANG_"):
                arg = node.value.args[0] if node.value.args else None
                out[node.targets[0].id] = str(arg.value) if isinstance(arg, ast.Constant) else None
    return out


def _getenv_defaults(path: Path) -> dict[str, str | None]:
    """``{"NAME": default}`` for every entry of envs.py's ``environment_variables`` dict whose
    value reads ``os.getenv("NAME", default)`` / ``os.environ.get(...)``."""
    tree = _parse(path)
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


# Environment values as the release parses them ------------------------------------------------

@dataclass(frozen=True)
class EnvParsed:
    how: str  # how the release parses the variable, in words
    wanted: str  # the values it takes
    raises: str = ""  # the exception the release raises on this value (the server stops)
    ignored: str = ""  # the warning with which it falls back to its default


def env_parsed(spec: EngineSpec, site: Path | None, name: str, env: dict[str, str]) -> EnvParsed | None:
    """The release's own parsing of ``env[name]``, run on the value: vLLM's envs.py entry (its
    lambda, with the module's own helper functions), SGLang's EnvField subclass ``parse`` (a
    ValueError there is a warning and the default). None: the declaration could not be run here,
    the value is then judged as before."""
    declarations = spec.env_declarations
    if site is None or declarations is None:
        return None
    path, style = declarations
    tree = _parse(site / path)
    if tree is None:
        return None
    ns = _definitions(tree, env)
    if style == "getenv":
        entry = _dict_entry(tree, name)
        if entry is None or ns is None:
            return None
        how = f"{path} reads it as {ast.unparse(entry)[len('lambda: '):][:80]}"
        try:
            eval(compile(ast.Expression(entry), str(site / path), "eval"), ns)()
        except (ValueError, TypeError) as exc:
            return EnvParsed(how, "0 or 1", raises=f"{type(exc).__name__}: {exc}")
        except Exception:
            return None
        return EnvParsed(how, "0 or 1")
    field = _envs_field(tree, name)
    if field is None or ns is None or field not in ns:
        return None
    how = f"{path} declares it {field}"
    try:
        ns[field].parse(ns[field], env[name])
    except ValueError as exc:
        return EnvParsed(how, "a value its parse takes", ignored=str(exc))
    except Exception:
        return None
    return EnvParsed(how, "a value its parse takes")


def _definitions(tree: ast.Module, env: dict[str, str]) -> dict | None:
    """The module's functions and classes, with its standard-library imports and an ``os`` whose
    environment is ``env``: enough to run an envs.py entry, never the module's own side effects."""
    import os as real_os
    import sys
    import types

    fake_os = types.ModuleType("os")
    fake_os.__dict__.update(real_os.__dict__)
    vars(fake_os).update(environ=dict(env), getenv=lambda k, d=None: env.get(k, d))
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            roots = [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else \
                [(node.module or "").split(".")[0]]
            if all(r in sys.stdlib_module_names and r != "os" for r in roots) and getattr(node, "level", 0) == 0:
                body.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not (
                isinstance(node, ast.ClassDef) and node.name == "Envs"):
            body.append(node)
    ns: dict = {"os": fake_os, "__name__": "kimi_patcher_envs"}
    try:
        exec(compile(ast.Module(body=body, type_ignores=[]), "<envs definitions>", "exec"), ns)
    except Exception:
        return None
    return ns


def _dict_entry(tree: ast.Module, name: str) -> ast.Lambda | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == name and isinstance(value, ast.Lambda):
                    return value
    return None


def _envs_field(tree: ast.Module, name: str) -> str | None:
    """The EnvField class SGLang's ``class Envs`` declares ``name`` with (``EnvBool``...)."""
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Envs"):
        for node in cls.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                    and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
                return node.value.func.id
    return None


# The methods that draft with the target's own multi-token-prediction layers --------------------

def mtp_target_architectures(spec: EngineSpec, site: Path | None) -> frozenset[str] | None:
    """The target architectures whose own MTP layers the release loads as the draft model, read
    where the engine module says (its MTP model file and the targets it serves; the
    ``if model_arch in [...]`` lists under which the release sets the draft model to the target);
    None: not read (no install, or the release's code moved)."""
    if site is None:
        return None
    launch = spec.launch
    found: set[str] = set()
    if launch.mtp_model is not None and (site / launch.mtp_model[0]).is_file():
        found |= set(launch.mtp_model[1])
    for rel in launch.mtp_arch_lists:
        base = site / rel
        for path in sorted(base.glob("*.py")) if base.is_dir() else [base]:
            tree = _parse(path)
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.If) and _draft_is_the_target(node):
                    found |= _listed(node.test)
    return frozenset(found) or None


def _draft_is_the_target(node: ast.If) -> bool:
    """``if model_arch in [...]: if ...draft_model_path is None: <draft path> = <the model path>``."""
    text = ast.unparse(ast.Module(body=node.body, type_ignores=[]))
    return "speculative_draft_model_path" in text and re.search(
        r"speculative_draft_model_path\s*=\s*\w+\.model_path", text) is not None


def _listed(test: ast.expr) -> set[str]:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In) \
            and isinstance(test.left, ast.Name) and test.left.id.endswith("arch") \
            and isinstance(test.comparators[0], (ast.List, ast.Tuple, ast.Set)):
        return {e.value for e in test.comparators[0].elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def mtp_methods(spec: EngineSpec, site: Path | None) -> frozenset[str]:
    """The *_mtp methods the release's Literal types name (vLLM's MTPModelTypes, or SpeculativeMethod
    before it existed), and "mtp" itself where named."""
    out: set[str] = set()
    for rel in spec.launch.mtp_declarations:
        tree = _parse(site / rel) if site is not None else None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id in ("MTPModelTypes", "SpeculativeMethod") for t in targets):
                    out |= {c.value for c in ast.walk(node.value or node) if isinstance(c, ast.Constant)
                            and isinstance(c.value, str) and (c.value == "mtp" or c.value.endswith("_mtp"))}
    return frozenset(out)


def env_true(value: str | None) -> bool:
    """vLLM reads these as ``bool(int(value))``."""
    try:
        return bool(int(value)) if value is not None else False
    except ValueError:
        return False


# Which vLLM model runner a launch uses ----------------------------------------------------------

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
PLATFORM_FILE = "vllm/platforms/interface.py"


def vllm_runners(version: Version, site: Path | None) -> tuple[str, ...]:
    """The model runners the release ships ("v1", "v2"): its runner files, else its version."""
    if site is not None and (site / Path(V1_RUNNER_FILE).parts[0]).is_dir():  # the package is there
        return tuple(name for name, rel in (("v1", V1_RUNNER_FILE), ("v2", V2_RUNNER_FILE)) if (site / rel).is_file())
    return tuple(name for name, has in (("v1", version < V1_RUNNER_REMOVED), ("v2", version >= V2_RUNNER_SINCE))
                 if has)


def v2_env_refused(site: Path | None) -> bool:
    """Whether start-up refuses VLLM_USE_V2_MODEL_RUNNER set to anything but "1" (0.34.0:
    ``if env == "VLLM_USE_V2_MODEL_RUNNER": if value != "1": raise``), read from the syntax tree."""
    tree = _parse(site / PLATFORM_FILE) if site is not None else None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.If) and _compares_to(node.test, V2_RUNNER_ENV, ast.Eq):
            for inner in (n for stmt in node.body for n in ast.walk(stmt)):
                if isinstance(inner, ast.If) and _compares_to(inner.test, "1", ast.NotEq) \
                        and any(isinstance(n, ast.Raise) for stmt in inner.body for n in ast.walk(stmt)):
                    return True
    return False


VLLM_CONFIG_FILE = "vllm/config/vllm.py"
_DEFAULT_V2_LIST = "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES"


def default_v2_architectures(site: Path | None) -> frozenset[str] | None:
    """The architectures for which the release's VllmConfig.use_v2_model_runner picks v2 when
    VLLM_USE_V2_MODEL_RUNNER is unset (0.22.0-0.28.0: ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``,
    read by ``_is_default_v2_model_runner_model``), read from its syntax tree; None where the
    release has no such list in use (before 0.22.0, or v2 for every model from 0.29.0)."""
    if site is None:
        return None
    tree = _parse(site / VLLM_CONFIG_FILE)
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


def _compares_to(test: ast.expr, value: str, op: type) -> bool:
    return (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], op)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == value)


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


ARCH_CONVERTOR_FILE = "vllm/transformers_utils/model_arch_config_convertor.py"
# What every release with the MLA EAGLE-3 drafter (0.18.0-0.34.0) lists, where no install can be read
# (tests/test_drafter_release.py reads each cached wheel). Not kimi_k2: vLLM maps it to DeepseekV3Config
# (transformers_utils/config.py), yet the EAGLE branch does not name it.
EAGLE_MLA_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp"})


def eagle_mla_model_types(site: Path | None) -> frozenset[str] | None:
    """The drafter ``model_type`` values for which the release runs an EAGLE drafter as MLA: the
    tuple in ``is_deepseek_mla``'s ``hf_text_config.model_type == "eagle"`` branch (vLLM wraps every
    HF-format EAGLE-3 drafter config in EAGLEConfig, model_type "eagle"), read from the syntax tree.
    Another model_type builds Eagle3DeepseekV2ForCausalLM with is_deepseek_mla False: the draft's
    KV cache and attention backend are chosen for standard attention. None: no files to read."""
    tree = _parse(site / ARCH_CONVERTOR_FILE) if site is not None else None
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)) if tree is not None else ():
        if fn.name != "is_deepseek_mla":
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.If) and _compares_to(node.test, "eagle", ast.Eq):
                tuples = [t for stmt in node.body for t in ast.walk(stmt) if isinstance(t, ast.Tuple)]
                if tuples:
                    return frozenset(c.value for c in tuples[0].elts
                                     if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return None


def console_scripts(dist_info: Path) -> frozenset[str] | None:
    """The console commands a release installs, as its ``entry_points.txt`` declares them (SGLang
    declares ``sglang`` from 0.5.5: none before, and no such file); None where that cannot be read."""
    import configparser

    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    try:
        parser.read_string((dist_info / "entry_points.txt").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return frozenset() if (dist_info / "METADATA").is_file() else None  # a wheel that declares none
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    return frozenset(parser["console_scripts"]) if parser.has_section("console_scripts") else frozenset()
