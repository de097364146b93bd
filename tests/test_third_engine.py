"""A third engine is its own module and its patches, nothing else (issues 45, 59).

A copy of patcher and the patch set gets two engines, each its module and its patches only:

- ``plainserve``: the five members every engine states (``EngineSpec``'s fields without a default)
  and nothing else, shaped like LMDeploy (its own distribution, one patch family, no EAGLE-3 drafter
  reading, no launch reading). list, apply, verify and revert work; doctor names it from its
  release's console scripts and judges its install, drafter check runs the checkpoint's own checks;
  both say what is not checked for this engine, in its own words, never another engine's.
- ``toyserve``: every capability of its own (its distribution ``toy-serve-engine``, import package
  ``toyserve_pkg`` and console command ``toy-serve``, none of them the engine's name; a launch reading
  with a check and a flag check, an environment variable its releases declare, and its own EAGLE-3
  drafter reading), borrowing nothing from the other engines.

Each command runs in a fresh interpreter on a site-packages holding the toy release, as a user runs
it. Every other file of the copy is byte for byte this checkout's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.real_drafters import kimi_target, specforge_kimi

ROOT = Path(__file__).resolve().parent.parent

PLAIN_MODULE = '''"""PlainServe (tests/test_third_engine.py): what every engine states, and nothing else."""

from patcher.engine_specs.base import EngineSpec

SPEC = EngineSpec(name="plainserve", title="PlainServe", distribution="plain-serve-engine",
                  package="plainserve_pkg", first_covered="1.0")
'''

ENGINE_MODULE = '''"""ToyServe (tests/test_third_engine.py), with behaviour of its own and nothing borrowed: an
environment variable its releases declare in toyserve_pkg/settings.py, a launch check doctor runs,
a flag check, and how it reads an EAGLE-3 drafter."""

import ast
from pathlib import Path

from patcher.engine_specs.base import (
    MLA_TARGETS,
    MULTI_LAYER_LLAMA,
    DrafterReading,
    EngineSpec,
    EnvParsed,
    EnvRules,
    EnvVar,
    IdsTaken,
    LaunchContext,
    LaunchReading,
    NoCapture,
    one_runner,
    one_runner_default,
    parse_file,
)
from patcher.findings import Finding, ok, problem

SETTINGS = "toyserve_pkg/settings.py"
TURBO_ENV = "TOYSERVE_TURBO"  # its turbo mode: the server runs without the drafter


def read_env(site: Path) -> dict[str, EnvVar]:
    """The os.getenv("NAME", "default") calls of toyserve_pkg/settings.py."""
    tree = parse_file(site / SETTINGS)
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "getenv"] \\
        if tree is not None else []
    declared = {a.value: d.value for a, d in (c.args for c in calls if len(c.args) == 2)
                if isinstance(a, ast.Constant) and isinstance(d, ast.Constant) and isinstance(d.value, str)}
    return {TURBO_ENV: EnvVar(TURBO_ENV, TURBO_ENV in declared, declared.get(TURBO_ENV))}


def parse_env(site: Path, name: str, env: dict[str, str]) -> EnvParsed | None:
    how = f"{SETTINGS} reads it as int(...)"
    try:
        int(env[name])
    except ValueError as exc:
        return EnvParsed(how, "an integer", raises=f"ValueError: {exc}")
    return EnvParsed(how, "an integer")


def turbo_check(ctx: LaunchContext) -> list[Finding]:
    if ctx.cmd.drafter is None or ctx.env.get(TURBO_ENV) != "1":
        return []
    return [problem("launch.turbo", f"{TURBO_ENV}=1: {ctx.release.label()} runs without the drafter",
                    wanted=f"{TURBO_ENV} unset", found=f"{TURBO_ENV}=1", hint=f"unset {TURBO_ENV}")]

def flag_check(values: dict[str, list[str]], drafter: Path, speculators_config: bool) -> list[Finding]:
    algos = values["--speculative-algorithm"]
    if algos and algos[-1].upper() == "EAGLE3":
        return [ok("flags.algorithm", "--speculative-algorithm EAGLE3 runs ToyServe's EAGLE-3 path")]
    return [problem("flags.algorithm", "ToyServe runs an EAGLE-3 drafter only with --speculative-algorithm EAGLE3",
                    wanted="--speculative-algorithm EAGLE3", found=" ".join(algos[-1:]) or "(absent)")]


def ids_taken(ask, runner, top, in_eagle, layer_ids) -> IdsTaken:
    if in_eagle is not None:
        return IdsTaken(in_eagle, "eagle_config")
    return IdsTaken(None, "default", "ToyServe reads ids only from eagle_config" if top is not None else "")


def no_capture(ask, runner, target_arch) -> NoCapture | None:
    return None if target_arch in MLA_TARGETS else NoCapture("ToyServe captures aux states of MLA targets only")


def switch_weights(ask, switch, drafter_class, prefix) -> tuple[str, str]:
    return "dropped", f"ToyServe's loader skips {prefix}* without a message"


def eagle_run(findings: list[Finding], release, drafter) -> list[Finding]:
    return findings + [problem("flags.algorithm", "ToyServe's EAGLE runs no EAGLE-3 drafter",
                               hint="--speculative-algorithm EAGLE3")]


SPEC = EngineSpec(
    name="toyserve",
    title="ToyServe",
    distribution="toy-serve-engine",
    package="toyserve_pkg",
    first_covered="1.0",
    launch=LaunchReading(
        serve_commands=(("toy-serve",),),
        # no PP flag; the model also as a positional (toy-serve MODEL)
        spellings={"model": ("--model-path",), "tp": ("--tp-size",),
                   "draft": ("--speculative-draft-model-path",), "algorithm": ("--speculative-algorithm",)},
        serve_takes_model=True,
        eagle3_flags="--speculative-algorithm EAGLE3",
        method_option=("--speculative-algorithm", None, True),
        eagle_methods=("EAGLE", "EAGLE3"),
        read={"model_path": "--model-path", "tp_size": "--tp-size",
              "speculative_algorithm": "--speculative-algorithm",
              "speculative_draft_model_path": "--speculative-draft-model-path"},
        flag_check=flag_check,
        checks=(turbo_check,),
    ),
    env=EnvRules(names=(TURBO_ENV,), read=read_env, parse=parse_env),
    drafter=DrafterReading(
        since={}, model_runners={}, runners=one_runner, default_runner=one_runner_default, loader_strict=False,
        adds_model_prefix=False, ids_keys=("eagle_config",), mla_model_type=None,
        eagle_with_eagle3_drafter=eagle_run, multi_layer_since=MULTI_LAYER_LLAMA, capture_family=("", ()),
        aux_ids_as_published=(), aux_ids_family=None, rope_parameters_read=None, eagle31_guard="",
        eagle31_facts_family=None, eagle31_read_since={"llama": {}}, built_classes={}, ids_taken=ids_taken,
        no_capture=no_capture, switch_weights=switch_weights),
)
'''

CORE = 'def value():\n    return 1\n'
DIFF = """--- a/{package}/core.py
+++ b/{package}/core.py
@@ -1,2 +1,2 @@
 def value():
-    return 1
+    return 2
"""
MANIFEST = """title = "value is 2"
why = "the toy's fix"
refs = ["toy/toy#1"]

mutation_sample = ["v1"]

[[variant]]
id = "v1"
versions = ">=1.0,<2.0"

[[probe]]
id = "value-is-2"
module = "{package}.core"
check = "value_is_2"
when = ["v1"]
"""
PROBES = '''def value_is_2(mod):
    got = mod.value()
    assert got == 2, f"core.value() returned {got}, wanted 2"
'''
# Each toy: its module, its distribution, import package and console command, and its release's own files.
TOYS = {
    "toyserve": (ENGINE_MODULE, "toy-serve-engine", "toyserve_pkg", "toy-serve",
                 {"settings.py": b'import os\nTURBO = int(os.getenv("TOYSERVE_TURBO", "0"))\n'}),
    "plainserve": (PLAIN_MODULE, "plain-serve-engine", "plainserve_pkg", "plain-serve", {}),
}


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _site(root: Path, engine: str) -> Path:
    """site-packages with the toy's release 1.0 as pip lays out a wheel: package, dist-info, RECORD,
    and the console command in entry_points.txt."""
    _, dist, package, script, more = TOYS[engine]
    site = root / "site"
    info = f"{dist.replace('-', '_')}-1.0.dist-info"
    files = {f"{package}/__init__.py": b"", f"{package}/core.py": CORE.encode(),
             **{f"{package}/{name}": data for name, data in more.items()},
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode(),
             f"{info}/entry_points.txt": f"[console_scripts]\n{script} = {package}.cli:main\n".encode()}
    record = "".join(f"{p},{_hash(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    return site


def _checkout(root: Path) -> Path:
    """This checkout's patcher and patches, plus each toy engine's module and patches."""
    repo = root / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "patcher", repo / "patcher", ignore=ignore)
    shutil.copytree(ROOT / "patches", repo / "patches", ignore=ignore)
    for engine, (module, _, package, _, _) in TOYS.items():
        (repo / "patcher" / "engine_specs" / f"{engine}.py").write_text(module)
        family = repo / "patches" / engine / "value-fix"
        family.mkdir(parents=True)
        (family.parent / "releases.txt").write_text("1.0\n")
        (family.parent / "reviewed.tsv").write_text("release\tvalue-fix\n1.0\tpatch v1\n")  # hand-checked
        (family / "patch.toml").write_text(MANIFEST.format(package=package))
        (family / "v1.diff").write_text(DIFF.format(package=package))
        (family / "probes.py").write_text(PROBES)
    return repo


def _added(repo: Path) -> set[str]:
    """The files of the copy that are not this checkout's, byte for byte."""
    out = set()
    for path in repo.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(repo)
            if not (ROOT / rel).is_file() or (ROOT / rel).read_bytes() != path.read_bytes():
                out.add(rel.as_posix())
    return out


def _patcher(repo: Path, *argv: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    got = subprocess.run([sys.executable, "-m", "patcher", *argv], cwd=repo.parent, env=env,
                         capture_output=True, text=True, timeout=120)
    assert "Traceback" not in got.stderr, got.stderr
    return got.returncode, got.stdout + got.stderr


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    return _checkout(tmp_path_factory.mktemp("third-engine"))


@pytest.fixture
def toyserve(checkout, tmp_path) -> tuple[Path, Path]:
    return checkout, _site(tmp_path, "toyserve")


@pytest.fixture
def plainserve(checkout, tmp_path) -> tuple[Path, Path]:
    return checkout, _site(tmp_path, "plainserve")


def test_the_copy_differs_only_by_the_engine_module_and_its_patches(toyserve):
    repo, _ = toyserve
    assert _added(repo) == {f"{where}/{toy}{what}" for toy in TOYS for where, what in (
        ("patcher/engine_specs", ".py"), ("patches", "/releases.txt"), ("patches", "/reviewed.tsv"),
        ("patches", "/value-fix/patch.toml"),
        ("patches", "/value-fix/v1.diff"), ("patches", "/value-fix/probes.py"))}


@pytest.mark.parametrize("engine", list(TOYS))
def test_list_apply_verify_revert_act_on_each_toy_by_its_own_names(checkout, tmp_path, engine):
    """With the five required members alone (plainserve) as with every capability (toyserve)."""
    repo, site, package = checkout, _site(tmp_path, engine), TOYS[engine][2]
    code, out = _patcher(repo, "list", "--engine", engine)
    assert code == 0 and f"{engine}/value-fix: value is 2" in out, out
    code, out = _patcher(repo, "apply", "--engine", engine, "--site", str(site))
    assert code == 0, out
    assert (site / package / "core.py").read_text() == CORE.replace("return 1", "return 2")
    assert "probe" in out and "passed" in out, out
    code, out = _patcher(repo, "verify", "--site", str(site), "--json")
    assert code == 0, out
    (doc,) = json.loads(out)  # one report per engine installed there
    assert (doc["engine"], doc["version"]) == (engine, "1.0")
    (family,) = doc["families"]
    assert (family["id"], family["state"]) == (f"{engine}/value-fix", "applied")
    assert [p["status"] for p in family["probes"]] == ["passed"]
    code, out = _patcher(repo, "revert", "--site", str(site))
    assert code == 0 and (site / package / "core.py").read_text() == CORE, out


def test_the_help_names_every_engine_found_in_the_registry(checkout):
    repo = checkout
    code, out = _patcher(repo, "verify", "--help")  # the help names it, found in the registry (issue 59)
    assert code == 0 and "{vllm,sglang,plainserve,toyserve,all}" in out
    assert "vllm, sglang, plainserve, toyserve or all" in " ".join(out.split()), out


@pytest.mark.parametrize("positional", [False, True], ids=["model-option", "model-positional"])
def test_doctor_reads_the_third_engines_launch_line(toyserve, tmp_path, positional):
    """Its console command, its spellings (no reader of its parser: stated, not guessed; the model as
    an option or a positional, and no PP flag), its family pending, and the drafter check run with
    the toy's own release: what its module does not state (a registry) is not known, never ok."""
    repo, site = toyserve
    target, drafter = kimi_target(tmp_path), specforge_kimi(tmp_path)
    model = [str(target)] if positional else ["--model-path", str(target)]
    code, out = _patcher(repo, "doctor", "--site", str(site), "--json", "--", "toy-serve", *model,
                         "--tp-size", "8", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                         str(drafter))
    doc = json.loads(out)
    assert (doc["target"], doc["drafter"], doc["tp"]) == (str(target), str(drafter), 8)
    found = {f["code"]: f for f in doc["findings"]}
    assert found["launch.engine"]["message"] == f"the command starts toyserve; toyserve 1.0 is installed at {site}"
    assert doc["parsed_by"] == "spellings" and "no reader of toyserve's own parser" in found["launch.parse"]["message"]
    assert "launch.entry" not in found  # its entry_points.txt declares toy-serve
    assert found["flags.algorithm"]["level"] == "ok"
    assert found["target.architecture"]["level"] == "hint" and "is not known" in found["target.architecture"]["message"]
    assert (code, doc["verdict"]) == (1, "no-go") and "toyserve/value-fix is pending" in " ".join(doc["reasons"]), doc
    _own_words(out)


@pytest.mark.parametrize(("value", "env_level", "turbo"), [("1", "ok", "problem"), ("yes", "problem", None)])
def test_doctor_runs_the_third_engines_own_checks_and_environment_rules(toyserve, tmp_path, value, env_level, turbo):
    """What the toy's module defines as code, and nothing in the shared code names: the variable its
    releases declare (read from the install's settings.py, its value parsed as the release does) and
    its own launch check."""
    repo, site = toyserve
    target, drafter = kimi_target(tmp_path), specforge_kimi(tmp_path)
    code, out = _patcher(repo, "doctor", "--site", str(site), "--json", "--", f"TOYSERVE_TURBO={value}", "toy-serve",
                         "--model-path", str(target), "--speculative-algorithm", "EAGLE3",
                         "--speculative-draft-model-path", str(drafter))
    found = {f["code"]: f for f in json.loads(out)["findings"]}
    env = found["env.TOYSERVE_TURBO"]
    assert env["level"] == env_level, env
    if env_level == "ok":
        assert env["message"] == "TOYSERVE_TURBO=1 (in the command; default '0')"
    else:
        assert "raises ValueError" in env["message"] and env["wanted"] == "an integer", env
    assert (found["launch.turbo"]["level"] if "launch.turbo" in found else None) == turbo, found.get("launch.turbo")
    assert code == 1


# Words only the other engines' modules may say: an engine's report speaks of it alone.
OTHER_ENGINES = ("vLLM", "vllm", "SGLang", "sglang")


def _own_words(out: str) -> None:
    said = [w for w in OTHER_ENGINES if w in out]
    assert not said, f"another engine's words {said} in:\n{out}"


def test_doctor_judges_the_install_of_an_engine_without_a_launch_reading(plainserve, tmp_path):
    """Named from its release's console scripts (entry_points.txt) or its package (python -m), its
    family's state judged, and its line said to be unchecked: no-go while pending, cannot tell once
    applied (never go: nothing of the line was read)."""
    repo, site = plainserve
    target, drafter = kimi_target(tmp_path), specforge_kimi(tmp_path)
    line = ["plain-serve", "--model", str(target), "--speculative-draft", str(drafter)]
    for command in (line, ["python", "-m", "plainserve_pkg.serve", *line[1:]]):
        code, out = _patcher(repo, "doctor", "--site", str(site), "--json", "--", *command)
        doc = json.loads(out)
        found = {f["code"]: f for f in doc["findings"]}
        assert (code, doc["verdict"], doc["parsed_by"]) == (1, "no-go", "none"), out
        assert doc["reasons"][0].startswith("plainserve/value-fix is pending"), doc["reasons"]
        assert found["launch.parse"]["level"] == "unknown", found
        assert "not checked for this engine" in found["launch.parse"]["message"]
        assert set(found) == {"launch.engine", "launch.parse"} and doc["drafter"] is None, found
        _own_words(out)
    assert _patcher(repo, "apply", "--site", str(site), "-q")[0] == 0
    code, out = _patcher(repo, "doctor", "--site", str(site), "--", *line)
    assert code == 3 and "verdict: cannot tell" in out, out
    _own_words(out)
    code, out = _patcher(repo, "doctor", "--site", str(site), "--", "other-serve", "--model", str(target))
    assert code == 2 and "is not a" in out, out  # a command no installed engine declares: usage


def test_doctor_finds_an_engine_without_a_launch_reading_beside_the_interpreter_the_command_names(checkout, tmp_path):
    """``/venv/bin/plain-serve ...`` with no --python/--site: the engine is that venv's, as for the engines
    doctor reads by their spellings; patcher's own environment has no plainserve."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site_packages,) = venv.glob("lib/python3*/site-packages")
    shutil.copytree(_site(tmp_path, "plainserve"), site_packages, dirs_exist_ok=True)
    script = venv / "bin" / "plain-serve"  # what pip writes for the release's console script
    script.write_text(f"#!{venv / 'bin' / 'python'}\nfrom plainserve_pkg.cli import main\nmain()\n")
    target = kimi_target(tmp_path)
    code, out = _patcher(checkout, "doctor", "--json", "--", "env", "A=1", str(script), "--model", str(target))
    doc = json.loads(out)
    assert (code, doc["verdict"], doc["parsed_by"]) == (1, "no-go", "none"), out
    assert doc["reasons"][0].startswith("plainserve/value-fix is pending"), doc["reasons"]
    assert (doc["verify"]["site"], doc["verify"]["python"]) == (str(site_packages), str(venv / "bin" / "python"))


def test_drafter_check_on_an_engine_without_a_drafter_reading(plainserve, tmp_path):
    """The checkpoint's own checks against the target, and one unknown line for what the engine does
    with it: exit 1 (unknown is never a pass). fix refuses: nothing says what to convert to."""
    repo, site = plainserve
    target, drafter = kimi_target(tmp_path), specforge_kimi(tmp_path)
    code, out = _patcher(repo, "drafter", "check", str(drafter), "--target", str(target), "--site", str(site),
                         "--json")
    doc = json.loads(out)
    levels = {f["code"]: f["level"] for f in doc["findings"]}
    assert code == 1 and levels["engine.drafter"] == "unknown", out
    assert levels["fc.shape"] == levels["aux.layer_ids"] == "ok", levels  # the checkpoint against the target
    assert not [c for c in levels if c.startswith(("keys.", "aux.capture", "config.", "flags."))], levels
    _own_words(out)
    code, out = _patcher(repo, "drafter", "fix", str(drafter), "--out", str(tmp_path / "copy"), "--site", str(site))
    assert code == 2 and "states no EAGLE-3 drafter reading" in out and not (tmp_path / "copy").exists(), out


def test_a_toy_with_its_own_drafter_reading_is_judged_by_it_in_its_own_words(toyserve, tmp_path):
    """toyserve states how it reads a drafter (ids from eagle_config only, capture for MLA targets,
    no registry, no loader child): the check follows those rules and says nothing of other engines."""
    repo, site = toyserve
    target, drafter = kimi_target(tmp_path), specforge_kimi(tmp_path)
    code, out = _patcher(repo, "drafter", "check", str(drafter), "--target", str(target), "--site", str(site),
                         "--flags=--speculative-algorithm EAGLE3", "--json")
    found = {f["code"]: f for f in json.loads(out)["findings"]}
    assert found["aux.capture"]["level"] == "ok" and "toyserve 1.0 captures [2, 30, 58]" in found["aux.capture"][
        "message"], found["aux.capture"]
    assert found["flags.algorithm"]["message"] == "--speculative-algorithm EAGLE3 runs ToyServe's EAGLE-3 path"
    assert found["keys.load"]["level"] == "unknown"  # no loader child: cannot tell, never ok
    assert "states no model registry" in found["target.architecture"]["message"]
    assert found["keys.decoder_prefix"]["message"].endswith("which spellings toyserve 1.0 reads is not stated")
    _own_words(out)


# What of the suite a toy engine can meet: every test that needs neither a published wheel (a toy has
# none on the index) nor a CPU env (a capability neither toy has). 973 tests, 115 s on one core.
SUITE_MARKS = "not wheels and not full and not cpuenv"


def _whole_copy(root: Path) -> Path:
    """The copy, with everything of this checkout a test reads (tests, docs, benchmarks, the tables)."""
    repo = _checkout(root)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("tests", "docs", "benchmarks"):
        shutil.copytree(ROOT / name, repo / name, ignore=ignore)
    for name in ("VERSIONS.md", "pyproject.toml", "setup.py", ".gitignore", "CHANGELOG.md", "README.md",
                 "CONTRIBUTING.md"):
        shutil.copyfile(ROOT / name, repo / name)
    return repo


@pytest.mark.full
def test_the_suite_holds_with_both_toys_added_and_their_generated_files_regenerated(tmp_path):
    """Issue 59's "done when": with the two toys' modules and patches added, and the files generated
    from them written by their commands (VERSIONS.md by the matrix, each family's derived-scope.json
    by scope_lock from the toy's own release), the suite passes with no other file touched."""
    repo = _whole_copy(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(repo)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    steps = [["-m", "patcher.core.matrix"]]  # VERSIONS.md, generated
    for engine in TOYS:  # each family's derived-scope.json, generated from the toy's own release
        steps.append(["-m", "patcher.maintainer.scope_lock", "--engine", engine, "--site",
                      str(_site(tmp_path / engine, engine))])
    for step in steps:
        got = subprocess.run([sys.executable, *step], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        assert got.returncode == 0, got.stdout + got.stderr
    regenerated = {rel for rel in _added(repo) if not rel.startswith(("patches/plainserve/", "patches/toyserve/"))}
    assert regenerated == {"VERSIONS.md", "patcher/engine_specs/plainserve.py", "patcher/engine_specs/toyserve.py"}
    got = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", SUITE_MARKS,
                          "--ignore", "tests/test_third_engine.py"],
                         cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert got.returncode == 0, got.stdout[-6000:]
    assert " passed" in got.stdout.splitlines()[-1] and "failed" not in got.stdout.splitlines()[-1], got.stdout[-500:]
