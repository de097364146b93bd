"""A third engine is its own module and its patches, nothing else (issue 45).

A copy of patcher and the patch set gets two new things only: ``patcher/engine_specs/toyserve.py``
(a fork of SGLang in the shape the issue names: its own distribution ``toy-serve-engine``, import
package ``toyserve_pkg`` and console command ``toy-serve``, none of them the engine's name, and
behaviour of its own as code: an environment variable its releases declare, and a launch check)
and ``patches/toyserve/`` (one family, its diff, its probe). Then ``apply``, ``verify`` and ``doctor``
run in a fresh interpreter on a site-packages holding the toy release, as a user runs them. Every
other file of the copy is byte for byte this checkout's.
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

ENGINE_MODULE = '''"""ToyServe: a fork of SGLang under its own names (tests/test_third_engine.py), with behaviour of
its own: an environment variable its releases declare in toyserve_pkg/settings.py, and a launch
check doctor runs."""

import ast
from pathlib import Path

from patcher.engine_specs import sglang
from patcher.engine_specs.base import EngineSpec, EnvParsed, EnvRules, EnvVar, Launch, LaunchContext, parse_file
from patcher.findings import Finding, problem

SETTINGS = "toyserve_pkg/settings.py"
TURBO_ENV = "TOYSERVE_TURBO"  # its turbo mode: the server runs without the drafter


def read_env(site: Path) -> dict[str, EnvVar]:
    """The os.getenv("NAME", "default") calls of toyserve_pkg/settings.py."""
    tree = parse_file(site / SETTINGS)
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "getenv"] \\
        if tree is not None else []
    declared = {c.args[0].value: c.args[1].value for c in calls if len(c.args) == 2}
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

SPEC = EngineSpec(
    name="toyserve",
    title="ToyServe",
    distribution="toy-serve-engine",
    package="toyserve_pkg",
    first_covered="1.0",
    launch=Launch(
        serve_commands=(("toy-serve",),),
        spellings={"model": ("--model-path",), "tp": ("--tp-size",), "pp": ("--pp-size",),
                   "draft": ("--speculative-draft-model-path",), "algorithm": ("--speculative-algorithm",)},
        eagle3_flags="--speculative-algorithm EAGLE3",
        method_option=("--speculative-algorithm", None, True),
        eagle_methods=("EAGLE", "EAGLE3"),
        read={"model_path": "--model-path", "tp_size": "--tp-size", "pp_size": "--pp-size",
              "speculative_algorithm": "--speculative-algorithm",
              "speculative_draft_model_path": "--speculative-draft-model-path"},
        flag_check=sglang.SPEC.launch.flag_check,  # and its launch flags
        checks=(turbo_check,),
    ),
    env=EnvRules(names=(TURBO_ENV,), read=read_env, parse=parse_env),
    drafter=sglang.SPEC.drafter,  # a fork reads a drafter as SGLang does
)
'''

CORE = 'def value():\n    return 1\n'
DIFF = """--- a/toyserve_pkg/core.py
+++ b/toyserve_pkg/core.py
@@ -1,2 +1,2 @@
 def value():
-    return 1
+    return 2
"""
MANIFEST = """title = "value is 2"
why = "the toy's fix"
refs = ["toy/toy#1"]

[[variant]]
id = "v1"
versions = ">=1.0,<2.0"

[[probe]]
id = "value-is-2"
module = "toyserve_pkg.core"
check = "value_is_2"
when = ["v1"]
"""
PROBES = '''def value_is_2(mod):
    got = mod.value()
    assert got == 2, f"toyserve_pkg.core.value() returned {got}, wanted 2"
'''


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _site(root: Path) -> Path:
    """site-packages with toy-serve-engine 1.0 as pip lays out a wheel: package, dist-info, RECORD,
    and the console command in entry_points.txt."""
    site = root / "site"
    info = "toy_serve_engine-1.0.dist-info"
    files = {"toyserve_pkg/__init__.py": b"", "toyserve_pkg/core.py": CORE.encode(),
             "toyserve_pkg/settings.py": b'import os\nTURBO = int(os.getenv("TOYSERVE_TURBO", "0"))\n',
             f"{info}/METADATA": b"Metadata-Version: 2.1\nName: toy-serve-engine\nVersion: 1.0\n",
             f"{info}/entry_points.txt": b"[console_scripts]\ntoy-serve = toyserve_pkg.cli:main\n"}
    record = "".join(f"{p},{_hash(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    return site


def _checkout(root: Path) -> Path:
    """This checkout's patcher and patches, plus the toy engine's module and patches."""
    repo = root / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "patcher", repo / "patcher", ignore=ignore)
    shutil.copytree(ROOT / "patches", repo / "patches", ignore=ignore)
    (repo / "patcher" / "engine_specs" / "toyserve.py").write_text(ENGINE_MODULE)
    family = repo / "patches" / "toyserve" / "value-fix"
    family.mkdir(parents=True)
    (family.parent / "releases.txt").write_text("1.0\n")
    (family / "patch.toml").write_text(MANIFEST)
    (family / "v1.diff").write_text(DIFF)
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
    return checkout, _site(tmp_path)


def test_the_copy_differs_only_by_the_engine_module_and_its_patches(toyserve):
    repo, _ = toyserve
    assert _added(repo) == {"patcher/engine_specs/toyserve.py", "patches/toyserve/releases.txt",
                            "patches/toyserve/value-fix/patch.toml", "patches/toyserve/value-fix/v1.diff",
                            "patches/toyserve/value-fix/probes.py"}


def test_apply_and_verify_act_on_the_third_engine_by_its_own_names(toyserve):
    repo, site = toyserve
    code, out = _patcher(repo, "apply", "--engine", "toyserve", "--site", str(site))
    assert code == 0, out
    assert (site / "toyserve_pkg" / "core.py").read_text() == CORE.replace("return 1", "return 2")
    assert "probe" in out and "passed" in out, out
    code, out = _patcher(repo, "verify", "--site", str(site), "--json")
    assert code == 0, out
    (doc,) = json.loads(out)  # one report per engine installed there
    assert (doc["engine"], doc["version"]) == ("toyserve", "1.0")
    (family,) = doc["families"]
    assert (family["id"], family["state"]) == ("toyserve/value-fix", "applied")
    assert [p["status"] for p in family["probes"]] == ["passed"]
    code, out = _patcher(repo, "revert", "--site", str(site))
    assert code == 0 and (site / "toyserve_pkg" / "core.py").read_text() == CORE, out
    code, out = _patcher(repo, "verify", "--help")  # the help names it, found in the registry (issue 59)
    assert code == 0 and "{vllm,sglang,toyserve,all}" in out
    assert "vllm, sglang, toyserve or all" in " ".join(out.split()), out


def test_doctor_reads_the_third_engines_launch_line(toyserve, tmp_path):
    """Its console command, its spellings (no reader of its parser: stated, not guessed), its family
    pending, and the drafter check run with the fork's own release: what its module does not state
    (a registry) is not known, never ok."""
    repo, site = toyserve
    target, drafter = kimi_target(tmp_path), specforge_kimi(tmp_path)
    code, out = _patcher(repo, "doctor", "--site", str(site), "--json", "--", "toy-serve", "--model-path", str(target),
                         "--tp-size", "8", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                         str(drafter))
    doc = json.loads(out)
    found = {f["code"]: f for f in doc["findings"]}
    assert found["launch.engine"]["message"] == f"the command starts toyserve; toyserve 1.0 is installed at {site}"
    assert doc["parsed_by"] == "spellings" and "no reader of toyserve's own parser" in found["launch.parse"]["message"]
    assert "launch.entry" not in found  # its entry_points.txt declares toy-serve
    assert found["flags.algorithm"]["level"] == "ok"
    assert found["target.architecture"]["level"] == "hint" and "is not known" in found["target.architecture"]["message"]
    assert (code, doc["verdict"]) == (1, "no-go") and "toyserve/value-fix is pending" in " ".join(doc["reasons"]), doc


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
