"""`patcher doctor -- <server command>`: the command read as the engine reads it, one verdict.

Fast tests read commands and the launch facts on stand-ins; the ``wheels`` tests run doctor on
the published trees (``--site``), where verify, the drafter check and the launch facts meet,
and prove each launch constant (the engine modules' runner and fusion rules) against every cached
release's files.
"""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from patcher import engine_specs
from patcher.cli.main import main
from patcher.doctor import command_checks, config_file
from patcher.engine_specs import base
from patcher.engine_specs.sglang import launch as sglang_launch
from patcher.engine_specs.vllm import launch as vllm_launch
from patcher.errors import LaunchUsageError
from patcher.maintainer import wheels
from patcher.release import launch_command
from patcher.release.launch_command import parse
from patcher.release.release import FamilyState, from_version
from tests.test_drafter import eagle3_config, make_drafter, make_target
from tests.test_drafter_release import k2_target


def fusion_findings(release, cmd, target):
    """SGLang's fusion check, as doctor hands it a launch (no environment read)."""
    return sglang_launch.fusion_findings(base.LaunchContext(release, cmd, target, {}, {}))


def two_batch_overlap_findings(release, cmd, target):
    return sglang_launch.two_batch_overlap_findings(base.LaunchContext(release, cmd, target, {}, {}))


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def doctor_json(*argv: str) -> tuple[int, dict]:
    code, out, _ = cli("doctor", "--json", *argv)
    doc = json.loads(out)
    assert doc["exit"] == code
    return code, doc


def by_code(doc: dict) -> dict[str, dict]:
    return {f["code"]: f for f in doc["findings"]}


# On a bare tree (``--site`` of a wheel's files, no dependencies) the release's loader cannot run:
# whether the drafter's keys load is not proven there, never "go" (issue 52; tests/test_drafter_loader.py
# judges the keys where the engine imports).
UNASKED = "keys.load: what the release's loader does with this checkpoint was not asked"


def proven(reasons: list[str]) -> list[str]:
    """The reasons, without the bare tree's one unproven line (the drafter's keys)."""
    return [r for r in reasons if not r.startswith(UNASKED)]


def only_the_keys_unproven(code: int, doc: dict) -> bool:
    """Every line proven but whether the drafter's keys load: "cannot tell" on a bare tree."""
    return (code, doc["verdict"]) == (3, "cannot tell") and len(doc["reasons"]) == 1 \
        and doc["reasons"][0].startswith(UNASKED)


def vllm_spec(drafter: Path | str) -> str:
    return json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})


# --- the command, read as the engine reads it ---------------------------------------------------

@pytest.mark.parametrize("written,token", [
    (["--config=/c.yaml"], "--config=/c.yaml"),
    (["--conf", "/c.yaml"], "--conf"),
    (["--confi=/c.yaml"], "--confi=/c.yaml"),
])
def test_a_config_file_spelled_otherwise_is_respelled_as_the_release_merges_it(written: list[str],
                                                                               token: str) -> None:
    """Which spellings the release reads a second time (its own two readings then decide: the wheel
    test in test_doctor_startup): each becomes ``--config FILE`` in its place, the rest untouched."""
    cmd = parse(["vllm", "serve", "/m", *written, "-tp", "8"])
    spelled = config_file.respelled(cmd)
    assert spelled is not None and (spelled.written, spelled.path) == (token, "/c.yaml")
    assert spelled.command.argv[-4:] == ("--config", "/c.yaml", "-tp", "8"), spelled.command.argv


@pytest.mark.parametrize("written", [
    ["--config", "/c.yaml"],  # merged as written
    ["--config=/a.yaml", "--config=/b.yaml"],  # two: the release's parser says what it does
    ["--c", "/c.yaml"], ["--context-length", "8"], ["--conf"],  # not the config option, or no file
])
def test_a_line_the_release_merges_or_that_names_no_one_file_is_read_once(written: list[str]) -> None:
    assert config_file.respelled(parse(["vllm", "serve", "/m", *written])) is None


def test_vllm_serve_positional_model_short_tp_and_underscore_spelling() -> None:
    cmd = parse(["VLLM_USE_V2_MODEL_RUNNER=1", "vllm", "serve", "/m/kimi", "--speculative_config",
                 vllm_spec("/m/draft"), "-tp", "8"])
    assert (cmd.engine, cmd.target, cmd.drafter, cmd.tp) == ("vllm", "/m/kimi", "/m/draft", 8)
    assert cmd.env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    assert cmd.argv[0] == "--speculative_config"  # the flags the drafter check reads start after the model
    assert parse(["vllm", "serve", "/m/t", "-pp", "2"]).pp == 2
    # `vllm serve T --model X` serves T (the CLI copies model_tag over --model)
    assert parse(["vllm", "serve", "/m/t", "--model", "/m/x"]).target == "/m/t"


def test_vllm_api_server_module_with_model_and_long_tp() -> None:
    cmd = parse(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model=/m/kimi",
                 "--tensor-parallel-size", "4", f"--speculative-config={vllm_spec('/m/d')}"])
    assert (cmd.engine, cmd.target, cmd.drafter, cmd.tp) == ("vllm", "/m/kimi", "/m/d", 4)


def test_sglang_launch_server_every_tp_spelling() -> None:
    for tp in ("--tp", "--tp-size", "--tensor-parallel-size"):
        cmd = parse(["/venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/m/k", tp, "8",
                     "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/d"])
        assert (cmd.engine, cmd.target, cmd.drafter, cmd.tp) == ("sglang", "/m/k", "/m/d", 8)
    assert parse(["python", "-m", "sglang.launch_server", "--model-path", "/m/k"]).tp is None
    cmd = parse(["sglang", "serve", "--model-path", "/m/k", "--tp", "4"])
    assert (cmd.engine, cmd.entry, cmd.target, cmd.tp) == ("sglang", "sglang serve", "/m/k", 4)


def test_sglang_options_are_not_taken_with_vllm_underscore_spellings() -> None:
    # SGLang's argparse has no "_" -> "-" folding: --tp_size is not its option, so doctor does not read it.
    cmd = parse(["python", "-m", "sglang.launch_server", "--model-path", "/m/k", "--tp_size", "8"])
    assert cmd.tp is None


# The engines whose launch lines doctor reads, as the usage error names them (issue 59: from the registry).
_TITLES = [s.title for s in engine_specs.ALL if s.launch is not None]
NOT_A_LAUNCH = f"the command after '--' is not a {', '.join(_TITLES[:-1])} or {_TITLES[-1]} server launch"


@pytest.mark.parametrize(("command", "what"), [
    ([], "doctor needs the server command after '--'"),
    (["FOO=1"], "doctor needs the server command after '--'"),
    (["ls", "-la"], NOT_A_LAUNCH),
    (["python", "-m", "http.server"], NOT_A_LAUNCH),
    (["vllm", "bench", "--model", "x"], NOT_A_LAUNCH),
])
def test_not_a_launch_is_a_usage_error(command: list[str], what: str) -> None:
    with pytest.raises(LaunchUsageError) as exc:
        parse(command)
    assert exc.value.what == what and exc.value.exit_code == 2
    read = [s.launch for s in engine_specs.ALL if s.launch is not None]  # the engines whose lines are read
    forms = [f"{' '.join(w)} " for launch in read for w in launch.serve_commands] + [
        f"python -m {launch.modules[0]} " for launch in read if launch.modules]
    assert all(form in exc.value.wanted for form in forms), exc.value.wanted  # every engine's ways in


@pytest.mark.parametrize(("line", "target", "drafter"), [
    (["vllm", "serve"], "vllm serve T or --model T", '"model": "D" in --speculative-config'),
    (["python", "-m", "sglang.launch_server"], "--model-path T", "--speculative-draft-model-path D"),
])
def test_a_missing_model_or_drafter_is_asked_for_in_the_engines_own_spelling(line, target, drafter) -> None:
    cmd = parse(line)
    found = {f.code: f.wanted for f in command_checks.path_findings(cmd, command_checks.Method(
        command_checks.EAGLE, "EAGLE3", "EAGLE3"))}
    assert found == {"launch.target": target, "launch.drafter": drafter}


def test_a_launch_reading_with_no_model_or_drafter_option_says_neither_is_read(monkeypatch) -> None:
    """Issue 59: an engine that takes no --model (a positional it does not state) and no drafter option
    crashed doctor (KeyError 'model', 'pp'). What its reading does not spell is unknown, never absent."""
    spec = next(s for s in engine_specs.ALL if s.launch is not None)
    launch = replace(spec.launch, spellings={"tp": spec.launch.spellings["tp"]}, serve_takes_model=False)
    monkeypatch.setitem(engine_specs.BY_NAME, spec.name, replace(spec, launch=launch))
    monkeypatch.setitem(launch_command._SPELLINGS, spec.name, launch.spellings)
    cmd = launch_command.with_argv(parse([*spec.launch.serve_commands[0], "M"]), ["--x", "1"])
    assert (cmd.target, cmd.drafter, cmd.pp) == (None, None, None)
    found = {f.code: f for f in command_checks.path_findings(cmd, command_checks.Method(
        command_checks.EAGLE, "EAGLE3", "EAGLE3"))}
    assert {code: f.level for code, f in found.items()} == {"launch.target": "unknown", "launch.drafter": "unknown"}
    assert "states no option naming the target" in found["launch.target"].message


@pytest.mark.parametrize("argv", [["doctor"], ["doctor", "--"], ["doctor", "--", "ls"]])
def test_cli_usage_is_exit_2_with_the_error_as_json(argv: list[str]) -> None:
    code, out, err = cli(*argv[:1], "--json", *argv[1:])
    doc = json.loads(out)
    assert (code, doc["exit"], doc["schema"]) == (2, 2, "patcher.doctor/1")
    assert err.startswith("error: ") and doc["error"]["what"] in err


# --- launch facts on stand-ins ------------------------------------------------------------------

ENVS_PY = '''
import os
environment_variables = {
    "VLLM_USE_V2_MODEL_RUNNER": lambda: bool(int(os.getenv("VLLM_USE_V2_MODEL_RUNNER", "0"))),
    "VLLM_OTHER": lambda: os.environ.get("VLLM_OTHER", "x"),
}
'''


def test_env_defaults_are_read_from_the_installs_envs_py(tmp_path: Path) -> None:
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "envs.py").write_text(ENVS_PY)
    got = command_checks.variables(engine_specs.spec("vllm"), tmp_path)
    assert got[vllm_launch.V2_RUNNER_ENV] == base.EnvVar(vllm_launch.V2_RUNNER_ENV, True, "0")
    assert got[vllm_launch.FLASHINFER_ALLREDUCE_ENV].read is False


K2 = ("DeepseekV3ForCausalLM",)


@pytest.mark.parametrize(("version", "env", "archs", "runner"), [
    ("0.11.0", {"VLLM_USE_V2_MODEL_RUNNER": "1"}, K2, "v1"),  # not read there
    ("0.16.0", {"VLLM_USE_V2_MODEL_RUNNER": "1"}, K2, "v2"),
    ("0.16.0", {}, K2, "v1"),
    ("0.22.0", {}, K2, "v1"),
    ("0.28.0", {}, ("KimiK25ForConditionalGeneration",), "v1"),
    ("0.28.0", {}, None, "unknown"),
    ("0.28.0", {}, ("Qwen3ForCausalLM",), "unknown"),
    ("0.28.0", {"VLLM_USE_V2_MODEL_RUNNER": "1"}, K2, "v2"),
    ("0.29.0", {}, ("KimiK25ForConditionalGeneration",), "v2"),
    ("0.29.0", {}, None, "v2"),
    ("0.29.0", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, K2, "v1"),
    ("0.29.0", {"PP": "2"}, K2, "v1"),  # 0.29.0's v2 lacks EAGLE-3 with pipeline parallelism
    ("0.30.0", {"PP": "2"}, K2, "v2"),
])
def test_vllm_runner(version: str, env: dict, archs: tuple | None, runner: str) -> None:
    v = Version(version)
    read = v >= Version("0.12.0")
    default = None if v >= Version("0.22.0") else "0"  # tri-state from 0.22.0 (proven on the trees below)
    var = base.EnvVar(vllm_launch.V2_RUNNER_ENV, read, default if read else None)
    pp = env.pop("PP", None) is not None
    assert vllm_launch.vllm_runner(v, env, var, archs, eagle3_pp=pp).name == runner


@pytest.mark.wheels
def test_the_runner_is_the_start_up_s_answer_where_it_ran(tmp_path: Path) -> None:
    """Where the release's start-up configuration ran (its ``VllmConfig.use_v2_model_runner``, asked
    in the parser child: tests/test_startup_grid.py proves that answer per release), the runner doctor
    names and the one whose capture the drafter check judges are that answer, decided once; the rules
    (``vllm_runner``) only where it did not run. On 0.22.1 the rule's word for a DeepSeek target is v1:
    a start-up that picked v2 (a feature of the line the rules do not know) must win."""
    from patcher.drafter.configs import parse_drafter_config, parse_target_config
    from patcher.drafter.release_checks import check_aux_capture
    from patcher.environment import engines
    from patcher.release.release import from_install

    site = wheels.tree("vllm", "0.22.1")
    release = from_install(engines.find("vllm", site=site))
    cmd = parse(["vllm", "serve", "/m", "--speculative-config", '{"method": "eagle3", "model": "/d"}'])
    variables = command_checks.variables(cmd.spec, site)
    folder = k2_target(tmp_path)
    target = parse_target_config(json.loads((folder / "config.json").read_text()), folder / "config.json")
    ruled = base.LaunchContext(release, cmd, target, {}, variables)
    asked = replace(ruled, startup={"status": "configured", "runner": "v2",
                                    "runner_by": "VllmConfig.use_v2_model_runner"})
    assert vllm_launch.launch_runner(ruled).name == "v1"
    assert vllm_launch.launch_runner(asked).name == "v2"
    assert "asked of vllm 0.22.1's start-up configuration" in vllm_launch.runner_findings(asked)[0].message
    drafter = parse_drafter_config(eagle3_config(aux=[2, 30, 58]), tmp_path / "config.json")
    judged = {f.code: f.message for f in check_aux_capture(drafter, target, release, {}, selected="v2")}
    assert "v2 runner (the one this launch uses)" in judged["aux.capture"], judged


def _sglang(version: str, fused_state: str | None = None):
    release = from_version("sglang", Version(version))
    if fused_state is None:
        return release
    others = [f for f in release.families if f.family.name != sglang_launch.FUSED_CAPTURE_FAMILY]
    family = replace(release.families[0].family, name=sglang_launch.FUSED_CAPTURE_FAMILY)
    return replace(release, families=(*others, FamilyState(family, fused_state, "stand-in")))


def _sglang_cmd(*extra: str):
    return parse(["python", "-m", "sglang.launch_server", "--model-path", "/m/k", "--speculative-algorithm",
                  "EAGLE3", "--speculative-draft-model-path", "/m/d", *extra])


def _target(arch: str):
    from patcher.drafter.configs import parse_target_config

    return parse_target_config({"architectures": [arch], "model_type": "x", "hidden_size": 8,
                                "num_hidden_layers": 61}, Path("config.json"))


K25, V3 = "KimiK25ForConditionalGeneration", "DeepseekV3ForCausalLM"


@pytest.mark.parametrize(("version", "state", "arch", "extra", "level", "in_hint"), [
    ("0.5.9", None, K25, ("--tp", "8"), "problem", "use sglang 0.5.10 or newer with --enforce-disable"),
    ("0.5.10", None, K25, ("--tp", "8"), "problem", "add --enforce-disable-flashinfer-allreduce-fusion"),
    ("0.5.10", None, K25, ("--tp", "8", "--enforce-disable-flashinfer-allreduce-fusion"), "ok", ""),
    ("0.5.10", None, K25, ("--tp", "1"), "ok", ""),
    ("0.5.10", None, K25, ("--tp", "8", "--enable-dp-attention"), "ok", ""),  # never auto-enabled with DP attention
    ("0.5.10", None, K25, ("--tp", "8", "--enable-dp-attention", "--enable-flashinfer-allreduce-fusion"),
     "problem", ""),
    ("0.5.10", None, K25, (), "ok", ""),  # TP defaults to 1
    ("0.5.8", None, K25, ("--tp", "8"), "ok", ""),  # K2.5 joins the auto-enable list in 0.5.9
    ("0.5.8", None, K25, ("--tp", "8", "--enable-flashinfer-allreduce-fusion"), "problem", "use sglang 0.5.10"),
    ("0.5.5", None, V3, ("--tp", "8"), "problem", ""),  # DeepSeek-V3 on SM100
    ("0.5.5", None, "LlamaForCausalLM", ("--tp", "8"), "ok", ""),
    ("0.5.10", None, None, ("--tp", "8"), "hint", ""),  # the target's config not read: cannot tell
    ("0.5.14", None, K25, ("--tp", "8"), "ok", ""),  # fixed upstream (sgl-project/sglang#28343)
    ("0.5.14", None, K25, ("--tp", "8", "--enforce-disable-flashinfer-allreduce-fusion"), "problem", "leave it out"),
    ("0.5.9", None, K25, ("--tp", "8", "--enforce-disable-flashinfer-allreduce-fusion"), "problem",
     "use sglang 0.5.10 or newer with it"),
    ("0.5.4.post1", None, V3, ("--tp", "8"), "ok", ""),  # no DeepSeek capture at all: setup says so
    ("0.5.10", "applied", K25, ("--tp", "8"), "ok", ""),
    ("0.5.10", "upstream", K25, ("--tp", "8"), "ok", ""),
    ("0.5.10", "pending", K25, ("--tp", "8"), "problem", "run 'patcher apply --engine sglang', or add --enforce"),
    ("0.5.12", "conflict", K25, ("--tp", "8"), "problem", "add --enforce-disable-flashinfer-allreduce-fusion"),
])
def test_sglang_fused_allreduce_capture(version, state, arch, extra, level, in_hint) -> None:
    target = _target(arch) if arch else None
    (f,) = fusion_findings(_sglang(version, state), _sglang_cmd(*extra), target)
    assert (f.code, f.level) == ("launch.allreduce_fusion", level)
    assert in_hint in f.hint
    if state is not None:
        assert f"sglang/{sglang_launch.FUSED_CAPTURE_FAMILY} {state}" in f.message


def test_a_flag_the_release_s_own_parser_took_is_never_refused_by_a_version_range() -> None:
    """Issue 53 item 3: SGLang 0.5.23's own parser accepted --enforce-disable-flashinfer-allreduce-fusion
    and doctor said the release has no such flag (a range written >=0.5.10,<0.5.14)."""
    cmd = _sglang_cmd("--tp", "8", "--enforce-disable-flashinfer-allreduce-fusion")
    (by_range,) = fusion_findings(_sglang("0.5.23"), cmd, _target(K25))
    assert by_range.level == "problem" and "has no --enforce-disable" in by_range.message  # read by spellings
    read = base.LaunchContext(_sglang("0.5.23"), cmd, _target(K25), {}, {}, parsed_by_release=True)
    assert [f.level for f in sglang_launch.fusion_findings(read)] == ["ok"]


@pytest.mark.wheels
def test_a_drafter_without_a_speculative_method_is_never_loaded(tmp_path: Path) -> None:
    """Issue 53 item 2: SGLang with a draft path and no --speculative-algorithm builds no draft worker."""
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    code, doc = doctor_json("--site", str(wheels.tree("sglang", "0.5.23")), "--", "python", "-m",
                            "sglang.launch_server", "--model-path", str(make_target(tmp_path)),
                            "--speculative-draft-model-path", str(drafter))
    f = by_code(doc)["launch.method"]
    assert (code, f["level"], f["hint"]) == (1, "problem", "add --speculative-algorithm EAGLE3")
    assert "the drafter is never loaded" in f["message"]


@pytest.mark.wheels
@pytest.mark.parametrize("value", ["{method: eagle3}", "eagle3", "[1, 2]"])
def test_a_speculative_config_that_is_not_a_json_object_is_no_go_without_the_engine(tmp_path, value) -> None:
    """Issue 53 item 1: on a bare tree a --speculative-config that is not JSON was "go", unmentioned."""
    code, doc = doctor_json("--site", str(wheels.tree("vllm", "0.34.0")), "--", "vllm", "serve",
                            str(k2_target(tmp_path)), "--speculative-config", value)
    f = by_code(doc)["launch.speculative_config"]
    assert (code, f["level"], f["found"]) == (1, "problem", value)
    assert f["message"] == "--speculative-config is not a JSON object: the server stops at argument parsing"


def test_explicit_fusion_flag_is_named_in_the_problem() -> None:
    (f,) = fusion_findings(_sglang("0.5.9"), _sglang_cmd("--tp", "8", "--enable-flashinfer-allreduce-fusion"),
                            _target(K25))
    assert f.level == "problem" and "(--enable-flashinfer-allreduce-fusion is given)" in f.message
    assert f.found == "--tp 8, --enable-flashinfer-allreduce-fusion"


def test_auto_fusion_names_the_target_and_the_gpus() -> None:
    (f,) = fusion_findings(_sglang("0.5.9"), _sglang_cmd("--tp", "8"), _target(K25))
    assert f.message.startswith("TP 8 with the FlashInfer allreduce fusion (sglang 0.5.9 turns it on by itself "
                                "for a KimiK25ForConditionalGeneration target on SM90/SM100 GPUs")
    (f,) = fusion_findings(_sglang("0.5.6"), _sglang_cmd("--tp", "8"), _target(V3))
    assert "DeepseekV3ForCausalLM target on SM100 GPUs" in f.message


def _tbo_release(version: str, state: str | None):
    """The release as the manifests declare it, the two-batch-overlap family's state replaced when given."""
    release = from_version("sglang", Version(version))
    if state is None:
        return release
    return replace(release, families=tuple(replace(f, state=state) if f.family.name == sglang_launch.TBO_CAPTURE_FAMILY
                                           else f for f in release.families))


TBO = "--enable-two-batch-overlap"


@pytest.mark.parametrize(("version", "state", "arch", "extra", "level", "in_message"), [
    ("0.5.10", None, K25, (TBO,), "problem", "sglang 0.5.10 as published hands the drafter only the layers below"),
    ("0.5.4.post2", None, V3, (TBO,), "problem", "as published"),
    ("0.5.16", "applied", K25, (TBO,), "problem", "the server refuses it at start-up"),
    ("0.5.17", None, V3, (TBO,), "problem", "sglang 0.5.17 fails at the first overlapped forward"),
    ("0.5.23", None, "DeepseekV32ForCausalLM", (TBO,), "problem", "fails at the first overlapped forward"),
    ("0.5.10", None, None, (TBO,), "hint", "no SGLang release supports it"),  # the target's config not read
    ("0.5.4.post1", None, V3, (TBO,), None, ""),  # no DeepSeek aux capture at all: setup.* says so
    ("0.5.10", None, "LlamaForCausalLM", (TBO,), None, ""),  # another model's forward: not judged
    ("0.5.10", None, K25, (), None, ""),  # no two-batch overlap
])
def test_sglang_two_batch_overlap_with_eagle3(version, state, arch, extra, level, in_message) -> None:
    findings = two_batch_overlap_findings(_tbo_release(version, state), _sglang_cmd(*extra),
                                          _target(arch) if arch else None)
    if level is None:
        assert findings == []
        return
    (f,) = findings
    assert (f.code, f.level) == ("launch.two_batch_overlap", level)
    assert in_message in f.message and "no SGLang release supports it" in f.message
    assert (f.found, f.hint) == (TBO, f"launch without {TBO}")


def test_two_batch_overlap_without_eagle3_is_not_judged() -> None:
    cmd = parse(["python", "-m", "sglang.launch_server", "--model-path", "/m/k", "--speculative-algorithm", "EAGLE",
                 "--speculative-draft-model-path", "/m/d", TBO])
    assert two_batch_overlap_findings(_tbo_release("0.5.10", None), cmd, _target(K25)) == []


# --- on the published trees ----------------------------------------------------------------------

def _applied(tmp_path: Path, engine: str, version: str) -> Path:
    """A copy of the published tree after 'patcher apply' (every default family)."""
    site = tmp_path / "site"
    shutil.copytree(wheels.tree(engine, version), site)
    assert cli("apply", "--engine", engine, "--site", str(site), "--no-probes")[0] == 0
    return site


def _vllm_launch(tmp_path: Path, *extra: str, drafter: Path | None = None) -> list[str]:
    target = k2_target(tmp_path)
    drafter = drafter or make_drafter(tmp_path, config=eagle3_config(aux=None))
    return ["vllm", "serve", str(target), "--speculative-config", vllm_spec(drafter), "-tp", "8", *extra]


@pytest.mark.wheels
def test_vllm_as_published_is_no_go_with_verify_reasons(tmp_path: Path) -> None:
    code, doc = doctor_json("--site", str(wheels.tree("vllm", "0.15.1")), "--", *_vllm_launch(tmp_path))
    assert (code, doc["verdict"], doc["engine"]["version"], doc["tp"]) == (1, "no-go", "0.15.1", 8)
    pending = [f['id'] for f in doc["verify"]["families"] if f["state"] == "pending"]
    met = [fam["id"] for fam in doc["families"] if fam["meets"] == "yes"]
    assert {"vllm/eagle3-target-whitelist", "vllm/mla-aux-capture"} <= set(met) < set(pending)
    # verify's reasons this launch meets first, as verify orders them, each saying why it matters here
    assert [r.split(" ", 1)[0] for r in doc["reasons"][:len(met)]] == met
    assert doc["reasons"][0].endswith(" is pending (this launch meets it: the line runs EAGLE3 with a drafter; "
                                      "the target is DeepseekV3ForCausalLM)")
    pending = doc["reasons"][:len(met)]
    spared = {c for c, f in by_code(doc).items() if c.startswith("family.") and f["level"] == "hint"}
    assert spared == {"family.sm120-allreduce-fusion", "family.eagle3-config-aux-ids", "family.eagle31-switches",
                      "family.eagle3-v2-runner-guard"}
    # The drafter check says what the release does as it stands: no capture for a DeepSeek target.
    (capture,) = proven(doc["reasons"][len(pending):])
    assert capture.startswith("aux.capture: vllm 0.15.1") and "captures nothing" in capture
    assert doc["verify"]["action"] == "verify" and all(not f["probes"] for f in doc["verify"]["families"])
    assert doc["next"] == [f"patcher apply --engine vllm --site {wheels.tree('vllm', '0.15.1')}"]
    f = by_code(doc)
    assert f["launch.runner"]["message"] == ("the v1 model runner: VLLM_USE_V2_MODEL_RUNNER is not set "
                                             "(default '0')")
    assert not any(code.startswith("setup.") for code in f)  # verify's section says it, once
    assert f["flags.algorithm"]["level"] == "ok"  # the drafter check ran with the command's flags


@pytest.mark.wheels
def test_vllm_patched_has_only_its_drafter_keys_unproven_on_a_bare_tree(tmp_path: Path) -> None:
    site = _applied(tmp_path, "vllm", "0.17.0")
    code, out, err = cli("doctor", "--site", str(site), "--", *_vllm_launch(tmp_path))
    assert (code, err) == (3, ""), out
    assert out.splitlines()[-2].startswith("verdict: cannot tell (1 reason(s): 0 from verify, 0 problem(s), 1 unknown")
    assert out.splitlines()[-1].startswith(f"exit 3: {UNASKED}")
    assert "next:" not in out
    assert "  ok       launch.runner: the v1 model runner" in out


@pytest.mark.wheels
def test_vllm_v2_runner_without_an_eagle3_aux_path_is_no_go(tmp_path: Path) -> None:
    site = _applied(tmp_path, "vllm", "0.16.0")
    code, doc = doctor_json("--site", str(site), "--", "VLLM_USE_V2_MODEL_RUNNER=1", *_vllm_launch(tmp_path))
    runner = by_code(doc)["launch.runner"]
    assert (code, runner["level"]) == (1, "problem")
    assert runner["hint"] == "unset VLLM_USE_V2_MODEL_RUNNER, or use vllm 0.17.0 or newer"
    # the drafter check judges the runner the line selects (found on a GPU: it judged the default one)
    capture = by_code(doc)["aux.capture"]
    assert capture["message"].startswith("vllm 0.16.0, v2 runner (the one this launch uses) captures nothing")
    assert proven(doc["reasons"]) == [f"launch.runner: {runner['message']}", f"aux.capture: {capture['message']}"]
    assert doc["env"]["VLLM_USE_V2_MODEL_RUNNER"] == {"read": True, "default": "0", "value": "1",
                                                       "from_command": True}


@pytest.mark.wheels
def test_vllm_v2_runner_from_the_environment_with_aux_path_is_go(tmp_path: Path, monkeypatch) -> None:
    site = _applied(tmp_path, "vllm", "0.17.0")
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    code, doc = doctor_json("--site", str(site), "--", *_vllm_launch(tmp_path))
    assert only_the_keys_unproven(code, doc)
    assert by_code(doc)["launch.runner"]["message"] == "the v2 model runner: VLLM_USE_V2_MODEL_RUNNER=1"
    assert by_code(doc)["env.VLLM_USE_V2_MODEL_RUNNER"]["message"] == (
        "VLLM_USE_V2_MODEL_RUNNER=1 (in the environment; default '0')")


@pytest.mark.wheels
def test_missing_paths_and_bad_tp_are_each_a_reason(tmp_path: Path) -> None:
    site = str(wheels.tree("vllm", "0.15.1"))
    code, doc = doctor_json("--site", site, "--", "python", "-m", "vllm.entrypoints.openai.api_server",
                            "--model", str(tmp_path / "nope"), "--speculative_config",
                            vllm_spec(tmp_path / "gone"), "--tensor-parallel-size", "eight")
    f = by_code(doc)
    assert code == 1
    assert (f["launch.target"]["level"], f["launch.drafter"]["level"], f["launch.tp"]["level"]) == (
        "problem", "problem", "problem")
    assert f"launch.drafter: the drafter folder {tmp_path / 'gone'} does not exist: the server stops at load" \
        in doc["reasons"]
    hub = doctor_json("--site", site, "--", "vllm", "serve", "moonshotai/Kimi-K2-Instruct", "--config", "c.yaml")[1]
    # a bare tree: the release's parser does not import, and --config is read only by it
    assert by_code(hub)["launch.parse"]["level"] == "unknown" and "--config" in by_code(hub)["launch.parse"]["found"]
    assert by_code(hub)["launch.target"]["level"] == "unknown"  # a Hub id: nothing of it was read
    assert by_code(hub)["launch.drafter"]["level"] == "hint"  # no drafter: speculative decoding is off


@pytest.mark.wheels
def test_another_engine_than_installed_is_no_go(tmp_path: Path) -> None:
    site = str(wheels.tree("vllm", "0.15.1"))
    argv = ["--site", site, "--", "python", "-m", "sglang.launch_server", "--model-path", "/m/k"]
    code, doc = doctor_json(*argv)
    assert (code, doc["verdict"]) == (1, "no-go")
    assert doc["reasons"] == ["the command starts sglang, but this environment has vllm 0.15.1 and no sglang"]
    code, out, _ = cli("doctor", *argv)
    assert (code, out.splitlines()[-1]) == (1, "exit 1: " + doc["reasons"][0])


@pytest.mark.wheels
def test_vllm_0_29_picks_v2_for_a_kimi_launch(tmp_path: Path) -> None:
    code, doc = doctor_json("--site", str(wheels.tree("vllm", "0.29.0")), "--", *_vllm_launch(tmp_path))
    runner = by_code(doc)["launch.runner"]
    assert (runner["level"], runner["message"]) == ("ok", (
        "the v2 model runner: VLLM_USE_V2_MODEL_RUNNER is not set and vllm 0.29.0 picks v2 for every model "
        "(VllmConfig.use_v2_model_runner); VLLM_USE_V2_MODEL_RUNNER=0 keeps v1"))
    assert doc["env"]["VLLM_ALLREDUCE_USE_FLASHINFER"]["read"] is True


def _sglang_launch(tmp_path: Path, *extra: str) -> list[str]:
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    return ["python", "-m", "sglang.launch_server", "--model-path", str(make_target(tmp_path)),
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(drafter), *extra]


@pytest.mark.wheels
def test_sglang_tp8_with_the_fusion_is_no_go_until_it_is_disabled_or_fixed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(wheels.tree("sglang", "0.5.10"), site)
    fused = "sglang/eagle3-fused-allreduce-capture"
    assert cli("apply", "--engine", "sglang", "--site", str(site), "--no-probes", "--skip", fused)[0] == 0
    code, doc = doctor_json("--site", str(site), "--", *_sglang_launch(tmp_path, "--tp", "8"))
    fusion = by_code(doc)["launch.allreduce_fusion"]
    assert (code, fusion["level"]) == (1, "problem")
    assert "add --enforce-disable-flashinfer-allreduce-fusion" in fusion["hint"]
    assert f"launch.allreduce_fusion: {fusion['message']}" in doc["reasons"]
    assert f"{fused} is pending (this launch meets it: the line runs EAGLE3 with a drafter; launch.allreduce_fusion " \
        "is a problem here)" in doc["reasons"]
    assert doc["env"]["SGLANG_ENABLE_SPEC_V2"] == {"read": True, "default": "False", "value": None,
                                                    "from_command": False}
    shutil.rmtree(tmp_path / "drafter")
    shutil.rmtree(tmp_path / "kimi")
    code, doc = doctor_json("--site", str(site), "--", *_sglang_launch(
        tmp_path, "--tp", "8", "--enforce-disable-flashinfer-allreduce-fusion"))
    assert by_code(doc)["launch.allreduce_fusion"]["level"] == "ok"
    # the fusion is off: the family is pending on the install, and this launch does not meet it
    assert only_the_keys_unproven(code, doc)
    assert by_code(doc)["family.eagle3-fused-allreduce-capture"]["level"] == "hint"
    assert code == 3 and doc["next"] == []  # nothing this launch needs applied
    shutil.rmtree(tmp_path / "drafter")
    shutil.rmtree(tmp_path / "kimi")
    assert cli("apply", "--engine", "sglang", "--site", str(site), "--no-probes")[0] == 0
    code, out, err = cli("doctor", "--site", str(site), "--", *_sglang_launch(tmp_path, "--tp", "8"))
    assert (code, err) == (3, ""), out
    assert ("  ok       launch.allreduce_fusion: EAGLE-3 aux capture with the allreduce fusion: correct "
            f"({fused} applied)") in out
    assert out.splitlines()[-1].startswith(f"exit 3: {UNASKED}")


@pytest.mark.wheels
def test_sglang_two_batch_overlap_is_no_go_published_and_patched(tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(wheels.tree("sglang", "0.5.16"), site)
    code, doc = doctor_json("--site", str(site), "--", *_sglang_launch(tmp_path, TBO))
    tbo = by_code(doc)["launch.two_batch_overlap"]
    assert (code, tbo["level"]) == (1, "problem") and "sglang 0.5.16 as published" in tbo["message"]
    assert f"launch.two_batch_overlap: {tbo['message']}" in doc["reasons"]
    shutil.rmtree(tmp_path / "drafter")
    shutil.rmtree(tmp_path / "kimi")
    assert cli("apply", "--engine", "sglang", "--site", str(site), "--no-probes")[0] == 0
    code, doc = doctor_json("--site", str(site), "--", *_sglang_launch(tmp_path, TBO))
    tbo = by_code(doc)["launch.two_batch_overlap"]
    assert (code, tbo["level"]) == (1, "problem") and "the server refuses it at start-up" in tbo["message"]
    assert proven(doc["reasons"]) == [f"launch.two_batch_overlap: {tbo['message']}"]  # the only one left


@pytest.mark.wheels
def test_sglang_0_5_9_as_published_lists_every_reason(tmp_path: Path) -> None:
    code, doc = doctor_json("--site", str(wheels.tree("sglang", "0.5.9")), "--", *_sglang_launch(tmp_path, "--tp", "8"))
    fusion = by_code(doc)["launch.allreduce_fusion"]
    assert (code, doc["verdict"]) == (1, "no-go")
    assert fusion["hint"] == (f"run 'patcher apply --engine sglang --site {wheels.tree('sglang', '0.5.9')}', or use "
                              "sglang 0.5.10 or newer with --enforce-disable-flashinfer-allreduce-fusion")
    pending = [r for r in doc["reasons"] if " is pending (this launch meets it: " in r]
    assert pending and all(r.startswith("sglang/") for r in pending)
    assert any(r.startswith("sglang/k25-aux-capture") for r in pending)  # the target is a Kimi-K2.5 wrapper
    assert any(r.startswith("sglang/eagle3-fused-allreduce-capture") for r in pending)
    assert f"launch.allreduce_fusion: {fusion['message']}" in doc["reasons"]
    (tmp_path / "again").mkdir()
    code, out, _ = cli("doctor", "--site", str(wheels.tree("sglang", "0.5.9")), "--",
                       *_sglang_launch(tmp_path / "again", "--tp", "8"))
    lines = out.splitlines()
    assert (code, lines[-1]) == (1, "exit 1: " + "; ".join(doc["reasons"]))  # the same reasons, last
    assert lines[-2].startswith("verdict: no-go (")
    assert lines[-3] == f"next:    patcher apply --engine sglang --site {wheels.tree('sglang', '0.5.9')}"


@pytest.mark.parametrize(("line", "engine", "env", "unset", "cleared"), [
    ("uv run vllm serve /t -tp 8", "vllm", {}, (), False),
    ("uv run --with foo --python 3.12 -- python -m sglang.launch_server --model-path /t", "sglang", {}, (), False),
    ("bash -c 'vllm serve /t -tp 8'", "vllm", {}, (), False),
    ("sh -c 'X=1 python -m sglang.launch_server --model-path /t'", "sglang", {"X": "1"}, (), False),
    ("env -u VLLM_USE_V2_MODEL_RUNNER X=1 vllm serve /t", "vllm", {"X": "1"}, ("VLLM_USE_V2_MODEL_RUNNER",), False),
    ("env -uHOME vllm serve /t", "vllm", {}, ("HOME",), False),
    ("env -i PATH=/bin vllm serve /t", "vllm", {"PATH": "/bin"}, (), True),
    ("env -S 'A=1 vllm serve /t'", "vllm", {"A": "1"}, (), False),
    ("numactl -N 0 --membind=0 vllm serve /t", "vllm", {}, (), False),
    ("taskset -c 0-7 nohup python -m sglang.launch_server --model-path /t", "sglang", {}, (), False),
    ("CUDA_VISIBLE_DEVICES=0,1 nohup numactl --interleave all vllm serve /t", "vllm", {"CUDA_VISIBLE_DEVICES": "0,1"},
     (), False),
])
def test_launch_wrappers_are_read_through(line, engine, env, unset, cleared) -> None:
    """Issue 53 item 6: the forms users put in front of a server command are read through to it."""
    import shlex

    from patcher.release.launch_command import effective_env

    cmd = parse(shlex.split(line))
    assert (cmd.engine, cmd.target, cmd.env, cmd.unset, cmd.cleared) == (engine, "/t", env, unset, cleared)
    started = effective_env(cmd, {"HOME": "/root", "VLLM_USE_V2_MODEL_RUNNER": "1", "PATH": "/usr/bin"})
    assert all(name not in started for name in unset) and started.items() >= env.items()
    assert not cleared or set(started) == set(env)


@pytest.mark.parametrize("line", ["bash -c 'vllm serve /t; echo done'", "sh -c 'vllm serve $MODEL'",
                                  "sudo vllm serve /t", "docker run img vllm serve /t"])
def test_a_wrapper_doctor_cannot_read_through_is_a_usage_error_naming_it(line) -> None:
    import shlex

    with pytest.raises(LaunchUsageError) as err:
        parse(shlex.split(line))
    assert line.split()[0] in err.value.found or line[:10] in err.value.found or "-c" in err.value.what


def test_the_commands_interpreter_is_read_from_its_path() -> None:
    assert parse(["/venv/bin/python3.11", "-m", "sglang.launch_server", "--model-path", "m"]).python == \
        "/venv/bin/python3.11"
    assert parse(["/venv/bin/vllm", "serve", "m"]).python == "/venv/bin/python"
    assert parse(["vllm", "serve", "m"]).python is None  # PATH decides at start-up: not guessed


def _wrapper_python(folder: Path, site: Path) -> Path:
    """An interpreter of an environment that has ``site``: this python with the tree on its path."""
    import sys

    folder.mkdir(parents=True)
    script = folder / "python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {Path(sys.executable).resolve()} "$@"\n')
    script.chmod(0o755)
    return script


@pytest.mark.wheels
def test_the_engine_is_located_by_the_commands_interpreter(tmp_path: Path) -> None:
    python = _wrapper_python(tmp_path / "venv" / "bin", wheels.tree("vllm", "0.15.1"))
    code, doc = doctor_json("--", str(python.with_name("vllm")), "serve", "org/m")
    assert doc["engine"]["version"] == "0.15.1"  # this interpreter has no vLLM: found there
    assert (code, by_code(doc)["launch.target"]["level"]) == (3, "unknown")  # a Hub id: nothing of it read
    assert by_code(doc)["launch.engine"]["message"].endswith(f"(located by {python}, the command's interpreter)")


@pytest.mark.wheels
def test_a_missing_interpreter_in_the_command_is_a_reason(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(wheels.tree("vllm", "0.15.1")))  # this interpreter has the engine
    missing = tmp_path / "gone" / "bin" / "vllm"
    code, doc = doctor_json("--", str(missing), "serve", "org/m")
    f = by_code(doc)["launch.python"]
    assert (code, f["level"]) == (1, "problem")
    assert f["message"] == f"the command's interpreter {missing.with_name('python')} does not exist"
    code, doc = doctor_json("--site", str(wheels.tree("vllm", "0.15.1")), "--", str(missing), "serve", "org/m")
    assert "launch.python" not in by_code(doc)  # --site names the environment: the command's path is not read


@pytest.mark.wheels
def test_unreadable_drafter_and_target_are_reasons_not_crashes(tmp_path: Path) -> None:
    drafter, target = tmp_path / "drafter", tmp_path / "target"
    drafter.mkdir()
    target.mkdir()
    (drafter / "config.json").write_text("{not json")
    (target / "config.json").write_text("[1, 2]")
    code, doc = doctor_json("--site", str(wheels.tree("vllm", "0.15.1")), "--", "vllm", "serve", str(target),
                            "--speculative-config", vllm_spec(drafter))
    f = by_code(doc)
    assert (code, f["drafter.unreadable"]["level"], f["launch.target"]["level"]) == (1, "problem", "problem")
    assert f["launch.target"]["message"].startswith("the target's config cannot be read: ")
    assert f["drafter.unreadable"]["message"].startswith("the drafter cannot be read: ")


def test_no_engine_where_site_points_is_exit_2(tmp_path: Path) -> None:
    code, out, err = cli("doctor", "--json", "--site", str(tmp_path), "--", "vllm", "serve", "org/m")
    assert (code, json.loads(out)["exit"]) == (2, 2)
    assert err.startswith("error: ")


@pytest.mark.wheels
def test_probes_run_only_when_asked(tmp_path: Path) -> None:
    site = _applied(tmp_path, "sglang", "0.5.10")
    argv = ("--site", str(site), "--", *_sglang_launch(tmp_path, "--tp", "1"))
    _, quiet = doctor_json(*argv)
    _, probed = doctor_json("--probes", *argv)
    assert all(not fam["probes"] for fam in quiet["verify"]["families"])
    ran = [p for fam in probed["verify"]["families"] for p in fam["probes"]]
    assert ran and all(p["status"] in ("passed", "not importable") for p in ran)


@pytest.mark.wheels
def test_the_drafter_check_reads_the_commands_own_flags(tmp_path: Path) -> None:
    launch = [a if a != "EAGLE3" else "EAGLE" for a in _sglang_launch(tmp_path, "--tp", "1")]
    code, doc = doctor_json("--site", str(wheels.tree("sglang", "0.5.9")), "--", *launch)
    algo = by_code(doc)["flags.algorithm"]
    assert (code, algo["level"], algo["found"]) == (1, "problem", "--speculative-algorithm EAGLE")
    assert f"flags.algorithm: {algo['message']}" in doc["reasons"]
    assert "flags.draft_path" not in by_code(doc)  # the drafter checked is the one the command names


@pytest.mark.wheels
def test_sglang_serve_before_0_5_5_does_not_start(tmp_path: Path) -> None:
    code, doc = doctor_json("--site", str(wheels.tree("sglang", "0.5.4.post3")), "--", "sglang", "serve",
                            "--model-path", "org/m")
    entry = by_code(doc)["launch.entry"]
    assert (code, entry["level"]) == (1, "problem")
    assert entry["message"] == ("sglang 0.5.4.post3 has no 'sglang serve' (its entry_points.txt declares no 'sglang' "
                                "command): the command does not start")
    assert (entry["wanted"], entry["found"]) == ("python -m sglang.launch_server ...", "sglang serve")


@pytest.mark.wheels
def test_speculative_flags_without_a_drafter_are_a_reason() -> None:
    code, doc = doctor_json("--site", str(wheels.tree("sglang", "0.5.9")), "--", "python", "-m",
                            "sglang.launch_server", "--model-path", "org/m", "--speculative-algorithm", "EAGLE3")
    drafter = by_code(doc)["launch.drafter"]
    assert (code, drafter["level"]) == (1, "problem")
    assert drafter["message"].startswith("--speculative-algorithm EAGLE3 without a drafter path")
    ngram = json.dumps({"method": "ngram", "num_speculative_tokens": 3})
    code, doc = doctor_json("--site", str(wheels.tree("vllm", "0.15.1")), "--", "vllm", "serve", "org/m",
                            "--speculative-config", ngram)
    # ngram needs no draft model, and doctor checks nothing of it: said, never go
    assert "launch.drafter" not in by_code(doc) and by_code(doc)["flags.algorithm"]["level"] == "unknown"


@pytest.mark.wheels
@pytest.mark.parametrize("version, env, level", [
    ("0.34.0", {}, "problem"),  # v2 is the only runner, and it raises
    ("0.33.0", {}, "problem"),  # v2 by default for every model from 0.29.0; 0.30.0+ raise
    ("0.33.0", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, None),  # the v1 runner relays aux states as before
    ("0.29.0", {}, None),  # keeps v1 for EAGLE-3 with pipeline parallelism
])
def test_eagle3_with_pipeline_parallel_on_the_v2_runner(tmp_path: Path, monkeypatch, version, env, level) -> None:
    """Issue 32 case 6: vLLM's v2 runner verifies that the target relays aux hidden states between
    pipeline stages (verify_supports_aux_hidden_states_over_pp) and its DeepSeek model does not:
    the load raises. Read from the release's files, for a Kimi-K2 (DeepseekV3ForCausalLM) target."""
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code, doc = doctor_json("--site", str(wheels.tree("vllm", version)), "--", *_vllm_launch(tmp_path, "-pp", "2"))
    found = by_code(doc).get("launch.pipeline_parallel")
    assert (found or {}).get("level") == level, found
    if level:
        assert doc["verdict"] == "no-go" and "raises at load for EAGLE-3 with pipeline parallelism" in found["message"]
    (tmp_path / "tp").mkdir()
    code, doc = doctor_json("--site", str(wheels.tree("vllm", version)), "--", *_vllm_launch(tmp_path / "tp"))
    assert "launch.pipeline_parallel" not in by_code(doc)  # no pipeline parallelism, nothing to say


@pytest.mark.wheels
def test_doctor_names_no_option_it_does_not_have_and_prints_no_python_none(tmp_path: Path) -> None:
    """Issue 34 items 3 and 7: doctor has no --target (it reads the target the command names), and
    a variable without a default is said in words, not as 'None'."""
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None))
    code, doc = doctor_json("--site", str(wheels.tree("vllm", "0.29.0")), "--", "vllm", "serve", "org/kimi",
                            "--speculative-config", vllm_spec(drafter))
    said = " ".join(f["message"] + " " + f.get("hint", "") for f in doc["findings"])
    assert "--target" not in said and "name the target's local folder in the command" in said
    env = by_code(doc)["env.VLLM_USE_V2_MODEL_RUNNER"]["message"]
    assert env == ("VLLM_USE_V2_MODEL_RUNNER is not set, and the release has no default for it (it decides "
                   "by itself)") and "None" not in said


@pytest.mark.wheels
@pytest.mark.parametrize("engine, version", [("sglang", "0.5.23"), ("sglang", "0.5.17"), ("vllm", "0.34.0")])
def test_a_target_class_the_facts_do_not_cover_is_unknown_never_go(tmp_path: Path, engine, version) -> None:
    """Issue 32 case 2: a Kimi-K3 target (KimiK3ForConditionalGeneration). SGLang 0.5.17+ load both
    models, then stop at the draft head's set-up; vLLM 0.34.0's NVIDIA class captures. None of it is
    a fact this check has read: the line says unknown, no aux.capture line claims anything, and the
    verdict is not go, on either engine."""
    site = _applied(tmp_path, engine, version)
    target = tmp_path / "k3"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({
        "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "hidden_size": 7168,
        "num_hidden_layers": 61, "vocab_size": 163840}))
    if engine == "sglang":
        launch = ["python", "-m", "sglang.launch_server", "--model-path", str(target), "--speculative-algorithm",
                  "EAGLE3", "--speculative-draft-model-path",
                  str(make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer."))]
    else:
        launch = ["vllm", "serve", str(target), "--speculative-config",
                  vllm_spec(make_drafter(tmp_path, config=eagle3_config(aux=None)))]
    code, doc = doctor_json("--site", str(site), "--", *launch)
    f = by_code(doc)
    assert f["target.architecture"]["level"] == "unknown"
    assert not any(c.startswith("aux.capture") for c in f), [c for c in f if c.startswith("aux")]
    assert (code, doc["verdict"]) == (1, "no-go")
    assert any(r.startswith("target.architecture: target architecture KimiK3ForConditionalGeneration")
               for r in doc["reasons"])


@pytest.mark.wheels
@pytest.mark.parametrize("version", ["0.5.9", "0.5.13.post1", "0.5.17", "0.5.23"])
def test_sglang_eagle_algorithm_with_an_eagle3_drafter_says_only_what_runs(tmp_path: Path, version) -> None:
    """Issue 32 case 1, the field reports' command: the verdict was a right no-go, but the same report
    said ok aux.capture, ok vocab.d2t, ok vocab.lm_head and called the fusion correct. Each line now
    says what --speculative-algorithm EAGLE does (facts proven per release in test_drafter_release)."""
    site = _applied(tmp_path, "sglang", version)
    launch = _sglang_launch(tmp_path, "--tp", "8")
    launch[launch.index("EAGLE3")] = "EAGLE"
    code, doc = doctor_json("--site", str(site), "--", *launch)
    f = by_code(doc)
    assert (code, doc["verdict"]) == (1, "no-go")
    assert f["aux.capture"]["level"] == "problem" and "captures no aux hidden states" in f["aux.capture"]["message"]
    assert not [c for c in f if c.startswith("aux.capture.")]
    assert f["vocab.d2t"]["level"] == "hint" and "never read" in f["vocab.d2t"]["message"]
    assert f["vocab.lm_head"]["level"] == "problem" and "replaced by the target's" in f["vocab.lm_head"]["message"]
    assert f["fc.shape"]["level"] == "problem" and "launch.allreduce_fusion" not in f
    assert "EAGLE-1" not in f["flags.algorithm"]["message"]


@pytest.mark.wheels
@pytest.mark.parametrize("engine, version", [("sglang", "0.5.23"), ("vllm", "0.34.0")])
def test_a_dflash_launch_is_said_to_be_unchecked_not_judged_as_eagle3(tmp_path: Path, engine, version) -> None:
    """Issue 32 case 4: a DFLASH launch was a no-go for EAGLE-3 reasons that do not apply."""
    site = _applied(tmp_path, engine, version)
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    if engine == "sglang":
        launch = ["python", "-m", "sglang.launch_server", "--model-path", str(make_target(tmp_path)),
                  "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", str(drafter), "--tp", "8"]
    else:
        launch = ["vllm", "serve", str(k2_target(tmp_path)), "--speculative-config",
                  json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 3})]
    code, doc = doctor_json("--site", str(site), "--", *launch)
    f = by_code(doc)
    assert f["flags.algorithm"]["level"] == "unknown" and "DFLASH" in f["flags.algorithm"]["message"].upper()
    assert not [c for c in f if c.startswith(("aux.", "vocab.", "fc.", "keys.", "launch.allreduce"))]
    assert (code, doc["verdict"]) == (3, "cannot tell")
    assert [r for r in doc["reasons"] if not r.startswith("launch.parse")] == [
        f"flags.algorithm: {f['flags.algorithm']['message']}"]


@pytest.mark.wheels
def test_the_verdict_counts_every_reason_and_says_what_was_not_checked(tmp_path: Path) -> None:
    """Issue 34 items 4 and 8: 'no-go (0 problem(s) ...)' left out verify's reasons, and a 'go' without
    --probes never said that whether the engine imports there was not checked."""
    # the fusion asked for on SM 12.x: the SM120 gate, pending as published, is met
    site, fused = str(wheels.tree("sglang", "0.5.23")), "--enable-flashinfer-allreduce-fusion"
    code, out, _ = cli("doctor", "--gpu", "sm120", "--site", site, "--", *_sglang_launch(tmp_path, fused))
    verdict = next(ln for ln in out.splitlines() if ln.startswith("verdict:"))
    (tmp_path / "j").mkdir()
    code, doc = doctor_json("--gpu", "sm120", "--site", site, "--", *_sglang_launch(tmp_path / "j", fused))
    n = doc["counts"]["from_verify"]
    assert n == len([f for f in doc["families"] if f["meets"] == "yes"]) > 0
    assert verdict.startswith(f"verdict: no-go ({len(doc['reasons'])} reason(s): {n} from verify, ")
    assert verdict.endswith("not checked: whether the engine imports here (--probes checks it))")
    assert doc["not_checked"] and doc["counts"]["reasons"] == len(doc["reasons"])
