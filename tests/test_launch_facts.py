"""The launch facts against the published wheels, every constant release by release: the engine
modules' launch rules (env, vLLM's runners, SGLang's fusion) and patcher/doctor/command_checks.py's
release facts (MTP, console scripts).

The default tier reads the releases on each side of every boundary a constant claims; the rest
of the covered releases run with ``pytest --full`` (tests/conftest.py). Each test reads the
release's own files (envs.py, environ.py, config/vllm.py, server_args.py, the v2 model runner).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from packaging.version import Version

from patcher import engine_specs
from patcher.core import matrix
from patcher.doctor import command_checks
from patcher.engine_specs import base
from patcher.engine_specs.sglang import launch as sglang_launch
from patcher.engine_specs.vllm import launch as vllm_launch
from patcher.maintainer import wheels

# The releases on each side of every boundary a launch fact claims (and the newest covered one).
SAMPLE = {
    "vllm": {"0.11.2", "0.12.0", "0.16.0", "0.17.0", "0.21.0", "0.22.0", "0.28.0", "0.29.0", "0.30.0", "0.33.0"},
    "sglang": {"0.5.4.post1", "0.5.4.post2", "0.5.4.post3", "0.5.5", "0.5.6.post2", "0.5.7", "0.5.8.post1",
               "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.13.post1", "0.5.14", "0.5.23"},
}


def releases(engine: str, since: str = "0", below: str | None = None) -> list:
    out = []
    for version in matrix.releases(engine):
        v = Version(version)
        if v < Version(since) or (below is not None and v >= Version(below)):
            continue
        marks = () if version in SAMPLE[engine] else (pytest.mark.full,)
        out.append(pytest.param(engine, version, marks=marks, id=f"{engine}-{version}"))
    return out


def test_the_sample_is_made_of_covered_releases() -> None:
    for engine, versions in SAMPLE.items():
        assert versions <= set(matrix.releases(engine)), engine


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), releases("vllm"))
def test_vllm_env_defaults(engine: str, version: str) -> None:
    got = command_checks.variables(engine_specs.spec(engine), wheels.tree(engine, version))
    v2, fi = got[vllm_launch.V2_RUNNER_ENV], got[vllm_launch.FLASHINFER_ALLREDUCE_ENV]
    v = Version(version)
    # VLLM_USE_V2_MODEL_RUNNER: from 0.12.0, "0" until 0.21.0, tri-state (None) from 0.22.0
    assert (v2.read, v2.default) == ((False, None) if v < Version("0.12.0") else (True, "0") if v < Version("0.22.0")
                                     else (True, None))
    # VLLM_ALLREDUCE_USE_FLASHINFER: from 0.17.0, on by default from 0.29.0
    assert (fi.read, fi.default) == ((False, None) if v < Version("0.17.0") else (True, "0") if v < Version("0.29.0")
                                     else (True, "1"))


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), releases("vllm", since="0.12.0"))
def test_v2_runner_feeds_eagle3_aux_states_from_0_17_0(engine: str, version: str) -> None:
    runner = wheels.tree(engine, version) / "vllm" / "v1" / "worker" / "gpu" / "model_runner.py"
    feeds = "set_eagle3_aux_hidden_state_layers" in runner.read_text()
    assert feeds == (Version(version) >= vllm_launch.V2_RUNNER_EAGLE3_SINCE)


def _default_v2_architectures(tree: Path) -> frozenset[str]:
    for node in ast.parse((tree / "vllm" / "config" / "vllm.py").read_text()).body:
        name = getattr(node.targets[0], "id", "") if isinstance(node, ast.Assign) else ""
        if isinstance(node, ast.Assign) and name == "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES":
            return frozenset(ast.literal_eval(node.value.args[0]))  # type: ignore[attr-defined]
    return frozenset()


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), releases("vllm", since="0.22.0"))
def test_v2_runner_default_by_architecture_until_0_29_0(engine: str, version: str) -> None:
    """0.22.0-0.28.0 choose v2 by an architecture list without DeepSeek-V3/Kimi; 0.29.0+ for every model."""
    tree = wheels.tree(engine, version)
    source = (tree / "vllm" / "config" / "vllm.py").read_text()
    fn = next((n for n in ast.walk(ast.parse(source))
               if isinstance(n, ast.FunctionDef) and n.name == "use_v2_model_runner"), None)
    if fn is None:  # 0.34.0: no choice left, v2 is the only runner the release ships
        assert vllm_launch.vllm_runners(Version(version), tree) == ("v2",)
        assert vllm_launch.default_v2_architectures(tree) is None
        return
    by_architecture = "_is_default_v2_model_runner_model" in ast.unparse(fn)
    assert by_architecture == (Version(version) < vllm_launch.V2_RUNNER_DEFAULT_SINCE)
    # the list the check reads from the release is the one this test reads, where the release uses one
    assert (vllm_launch.default_v2_architectures(tree) is not None) == by_architecture
    if by_architecture:
        assert not _default_v2_architectures(tree) & vllm_launch.KIMI_ARCHITECTURES
        assert vllm_launch.default_v2_architectures(tree) == _default_v2_architectures(tree)


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), releases("sglang"))
def test_sglang_spec_v2_env_default(engine: str, version: str) -> None:
    var = command_checks.variables(engine_specs.spec(engine), wheels.tree(engine, version))[sglang_launch.SPEC_V2_ENV]
    v = Version(version)
    # declared 0.5.4.post1-0.5.13.post1, on by default from 0.5.11; 0.5.14 removed it (the V2 worker always runs)
    assert (var.read, var.default) == ((False, None) if v < Version("0.5.4.post1") else (True, "False")
                                       if v < Version("0.5.11") else (True, "True") if v < Version("0.5.14")
                                       else (False, None))


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), releases("sglang"))
def test_fusion_disable_flag_in_0_5_10_to_0_5_13_post1(engine: str, version: str) -> None:
    args = wheels.tree(engine, version) / "sglang" / "srt" / "server_args.py"
    has = args.exists() and f'"{sglang_launch.FUSION_DISABLE_FLAG}"' in args.read_text()
    assert has == sglang_launch.has_fusion_disable_flag(Version(version))


def _auto_enable_block(text: str) -> str:
    """The source of the first auto-enable of the fusion, from the model_arch test above it."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "enable_flashinfer_allreduce_fusion = True" in line)
    start = next(i for i in range(at, -1, -1) if "model_arch" in lines[i] and "in" in lines[i + 1] + lines[i])
    return "\n".join(lines[start:at])


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), releases("sglang", since="0.5.4.post2", below="0.5.14"))
def test_auto_fusion_targets_and_gpus(engine: str, version: str) -> None:
    v = Version(version)
    assert sglang_launch.fused_capture_bug_by_version(v)
    text = (wheels.tree(engine, version) / "sglang" / "srt" / "server_args.py").read_text()
    block = _auto_enable_block(text)
    assert "not self.enable_dp_attention" in block  # doctor's DP-attention exemption
    for arch in sorted(vllm_launch.KIMI_ARCHITECTURES):
        gpus = sglang_launch.auto_fusion_gpus(v, arch)
        assert (f'"{arch}"' in block) == (gpus is not None), arch
        if gpus == "SM90/SM100":
            assert "is_sm90_supported()" in block, arch
        elif gpus == "SM100":
            assert "is_sm100_supported()" in block and "is_sm90_supported() or" not in block, arch


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), releases("sglang"))
def test_sglang_serve_is_there_where_the_release_declares_its_console_script(engine: str, version: str) -> None:
    """doctor reads `sglang serve` from entry_points.txt: the script is declared exactly where its
    `serve` subcommand ships (0.5.5 on)."""
    tree = wheels.tree(engine, version)
    dist_info = next(tree.glob(f"sglang-{version}.dist-info"))
    serve = tree / "sglang" / "cli" / "serve.py"
    assert serve.exists() == ("sglang" in (command_checks.console_scripts(dist_info) or ())) \
        == (Version(version) >= Version("0.5.5"))


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), releases("vllm", since="0.29.0"))
def test_v2_runner_falls_back_for_eagle3_with_pipeline_parallelism_only_in_0_29_0(engine: str, version: str) -> None:
    text = (wheels.tree(engine, version) / "vllm" / "config" / "vllm.py").read_text()
    fallback = '"EAGLE3 with pipeline parallelism"' in text
    assert fallback == base.contains(vllm_launch.V2_EAGLE3_PP_FALLBACK, Version(version))


@pytest.mark.parametrize(("engine", "version"), releases("vllm") + releases("sglang"))
def test_mtp_methods_and_targets_are_read_from_every_release(engine: str, version: str) -> None:
    """What doctor's launch.mtp reads: vLLM names deepseek_mtp among its MTP methods and ships the
    model that loads DeepSeek-V3's MTP layer; SGLang resolves NEXTN to EAGLE and, for a
    DeepSeek-V3 target without a draft model, sets the draft model to the target."""
    site = wheels.tree(engine, version)
    targets = command_checks.mtp_target_architectures(engine_specs.spec(engine), site)
    assert targets is not None and "DeepseekV3ForCausalLM" in targets, targets
    if engine == "vllm":
        assert "deepseek_mtp" in command_checks.mtp_methods(engine_specs.spec(engine), site)
        assert "class DeepSeekMTP" in (site / "vllm/model_executor/models/deepseek_mtp.py").read_text()
    else:
        text = "".join(p.read_text() for rel in engine_specs.spec(engine).launch.mtp_arch_lists
                       for p in ([site / rel] if (site / rel).is_file() else sorted((site / rel).glob("*.py"))))
        assert '== "NEXTN"' in text, "NEXTN is no longer resolved where doctor reads it"
        assert "KimiK25ForConditionalGeneration" not in targets  # a Kimi-K2.5 EAGLE launch needs a draft model


DRAFTER_MODELS = {
    "vllm": ("vllm/model_executor/models/llama_eagle3.py", "vllm/model_executor/models/deepseek_eagle3.py"),
    "sglang": ("sglang/srt/models/llama_eagle3.py", "sglang/srt/models/kimi_k25_eagle3.py"),
}


@pytest.mark.parametrize(("engine", "version"), releases("vllm") + releases("sglang"))
def test_no_release_builds_a_moe_eagle3_drafter(engine: str, version: str) -> None:
    """shape.mlp: every EAGLE-3 drafter class builds a dense MLP and reads neither use_moe nor
    n_routed_experts (TorchSpec's MoE head), so the expert tensors have no parameter."""
    site = wheels.tree(engine, version)
    files = [site / rel for rel in DRAFTER_MODELS[engine] if (site / rel).is_file()]
    assert files
    def mlps(path: Path) -> list[str]:
        return [ast.unparse(n.value.func) for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Assign)
                and any(ast.unparse(t) == "self.mlp" for t in n.targets) and isinstance(n.value, ast.Call)]

    for path in files:
        text = path.read_text()
        assert "use_moe" not in text and "n_routed_experts" not in text, path
        # vLLM's Llama drafter layer subclasses llama.py's LlamaDecoderLayer and keeps its MLP
        built = mlps(path) or (mlps(path.with_name("llama.py")) if "LlamaDecoderLayer" in text else [])
        assert built and all(m.endswith("MLP") for m in built), (path, built)


@pytest.mark.parametrize(("engine", "version"), releases("vllm") + releases("sglang"))
def test_environment_values_are_parsed_as_the_release_parses_them(engine: str, version: str) -> None:
    """env.*: the release's own envs.py entry (vLLM) or EnvField.parse (SGLang), run on a value."""
    site, spec = wheels.tree(engine, version), engine_specs.spec(engine)
    name = vllm_launch.V2_RUNNER_ENV if engine == "vllm" else sglang_launch.SPEC_V2_ENV
    var = command_checks.variables(spec, site).get(name)
    if var is None or not var.read or var.only is not None:
        # not declared (or, vLLM 0.34.0, only start-up's check reads it: launch.runner judges it)
        assert spec.env.parse(site, name, {name: "true"}) is None or engine == "sglang"
        return
    good = spec.env.parse(site, name, {name: "1"})
    assert good is not None and not good.raises and not good.ignored
    bad = spec.env.parse(site, name, {name: "true" if engine == "vllm" else "maybe"})
    assert bad is not None
    if engine == "vllm":  # bool(int("true")) / maybe_convert_bool: the server stops
        assert bad.raises.startswith("ValueError") and not bad.ignored
    else:  # EnvBool: a warning, and the default
        assert bad.ignored and not bad.raises


def test_a_release_file_is_read_once_per_state_and_anew_after_a_write(tmp_path: Path) -> None:
    """``base.read_once``: doctor asks the same file many times; apply and revert write it anew
    (``os.replace``, as ``patcher apply`` does), and the next reading is of the new bytes."""
    path = tmp_path / "envs.py"
    name = "VLLM_USE_V2_MODEL_RUNNER"
    path.write_text(f'environment_variables = {{"{name}": lambda: os.getenv("{name}", "0")}}\n')
    calls: list[str] = []

    def reader(p: Path) -> tuple[str, ...]:
        calls.append(str(p))
        return tuple(vllm_launch.getenv_defaults(p).items())

    first = base.read_once(reader, path)
    assert base.read_once(reader, path) == first == ((name, "0"),) and len(calls) == 1
    staged = tmp_path / "envs.py.new"
    staged.write_text(path.read_text().replace('"0")', '"1")'))  # the same size: only the state tells
    staged.replace(path)
    assert base.read_once(reader, path) == ((name, "1"),) and len(calls) == 2
    path.unlink()
    assert base.read_once(reader, path) == () and len(calls) == 3, "a missing file is read (and not kept)"
