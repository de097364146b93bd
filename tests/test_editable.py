"""An editable checkout is a first-class install (issue 42): SGLang's own Docker images clone the
release tag and run ``pip install -e "python[all]"``; vLLM users on new GPUs build from source.

The checkout here is the published release's package, laid out as the image lays it
(``/sgl-workspace/sglang/python/sglang``), installed the way pip's PEP 660 editable install
leaves it: a dist-info in the venv's site-packages with ``direct_url.json`` saying
``"editable": true``, and a ``.pth`` that puts the checkout on ``sys.path``. The venv's own
interpreter finds it, as the server would. No RECORD lists the checkout's files: they are proven
against the hashes the release published (``patches/<engine>/published.json``, checked here
against the wheels).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patcher.cli.main import main
from patcher.maintainer import published_hashes, wheels

CASES = [("sglang", "0.5.9"), ("vllm", "0.34.0")]


def cli(*argv: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--json"], out=out, err=err)
    text = out.getvalue()
    return code, (json.loads(text)[0] if text.startswith("[") else json.loads(text) if text else {}), err.getvalue()


def editable(tmp_path: Path, engine: str, version: str) -> tuple[str, Path]:
    """(the venv's python, the checkout's package folder), installed as pip -e leaves it."""
    checkout = tmp_path / "workspace" / engine / "python"
    shutil.copytree(wheels.tree(engine, version) / engine, checkout / engine)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    dist = site / f"{engine}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {engine}\nVersion: {version}\n")
    (dist / "direct_url.json").write_text(json.dumps({"url": checkout.as_uri(), "dir_info": {"editable": True}}))
    (dist / "INSTALLER").write_text("pip\n")
    pth = site / f"__editable__.{engine}-{version}.pth"
    pth.write_text(f"{checkout}\n")
    (dist / "RECORD").write_text("".join(f"{p},,\n" for p in (f"{dist.name}/METADATA", f"{dist.name}/direct_url.json",
                                                               f"{dist.name}/INSTALLER", pth.name)))
    return str(venv / "bin" / "python"), checkout / engine


@pytest.mark.wheels
def test_the_shipped_published_hashes_are_the_wheels() -> None:
    assert published_hashes.main(["--check"]) == 0


@pytest.mark.wheels
@pytest.mark.parametrize(("engine", "version"), CASES, ids=[f"{e}-{v}" for e, v in CASES])
def test_apply_verify_revert_on_an_editable_checkout(tmp_path: Path, engine: str, version: str) -> None:
    python, package = editable(tmp_path, engine, version)
    before = {p: p.read_bytes() for p in package.rglob("*.py")}
    code, report, err = cli("verify", "--engine", engine, "--python", python, "--no-probes")
    assert report, err
    assert report["site"] == str(package.parent) and "editable checkout" in report["published_files"]
    assert "proven against the hashes" in report["published_files"]
    assert {f["state"] for f in report["families"]} <= {"pending", "upstream", "refused"}, report["families"]

    code, report, err = cli("apply", "--engine", engine, "--python", python)  # probes: no dependencies here
    assert code == 0, (report.get("reasons"), err)
    assert report["changed"] and all((package.parent / rel).read_bytes() != before[package.parent / rel]
                                     for rel in report["changed"])
    changed = report["changed"]
    applied = {rel: (package.parent / rel).read_text() for rel in changed}
    marked = [rel for rel in changed if "kimi-patcher" in applied[rel]]  # a file whose hunks say who wrote them
    assert marked
    assert {p["status"] for f in report["families"] for p in f["probes"]} <= {"not importable", "not in release"}
    assert cli("verify", "--engine", engine, "--python", python, "--no-probes")[0] == 0
    assert cli("apply", "--engine", engine, "--python", python, "--no-probes")[1]["changed"] == []  # twice: nothing

    # After apply, a local edit in a patched file is said (edited since apply), as on a wheel.
    edited = package.parent / report["changed"][0]
    edited.write_text(edited.read_text() + "# a local edit\n")
    code, seen, _ = cli("verify", "--engine", engine, "--python", python, "--no-probes")
    assert any("changed since apply" in w for f in seen["families"] for w in f["warnings"]), seen["families"]
    assert not any("pip install" in w for f in seen["families"] for w in f["warnings"])  # not over a checkout
    edited.write_text(edited.read_text().removesuffix("# a local edit\n"))

    code, report, err = cli("revert", "--engine", engine, "--python", python)
    assert code == 0, (report.get("reasons"), err)
    assert {p: p.read_bytes() for p in package.rglob("*.py")} == before  # byte for byte

    # Before apply, a file a variant writes that is neither as published nor ours: a conflict,
    # and nothing is written (the checkout is the user's: we never write over their edit).
    target = package.parent / marked[0]
    target.write_text(applied[marked[0]].replace("kimi-patcher", "a local hand edit", 1))  # our hunk, edited
    snapshot = {p: p.read_bytes() for p in package.rglob("*.py")}
    code, again, _ = cli("apply", "--engine", engine, "--python", python, "--no-probes")
    assert code == 1 and again["changed"] == [] and "conflict" in {f["state"] for f in again["families"]}
    assert {p: p.read_bytes() for p in package.rglob("*.py")} == snapshot


@pytest.mark.wheels
@pytest.mark.parametrize("layout", ["pth", "finder", "direct_url"])
def test_site_alone_finds_the_checkout_python_imports(tmp_path: Path, layout: str) -> None:
    """``--site`` (no interpreter to ask, a build stage's path) on an editable install: the package
    is where the install's .pth line, setuptools' finder MAPPING, or direct_url.json puts it, read
    as Python reads them; apply and revert act on the checkout, byte for byte."""
    python, package = editable(tmp_path, "sglang", "0.5.9")
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    pth = next(site.glob("__editable__.*.pth"))
    if layout == "finder":  # setuptools' strict/default mode for a package not at the path's root
        (site / "__editable___sglang_0_5_9_finder.py").write_text(f"MAPPING = {{'sglang': {str(package)!r}}}\n")
        pth.write_text("import __editable___sglang_0_5_9_finder; __editable___sglang_0_5_9_finder.install()\n")
    elif layout == "direct_url":
        pth.unlink()
    before = {p: p.read_bytes() for p in package.rglob("*.py")}
    code, report, err = cli("apply", "--engine", "sglang", "--site", str(site), "--no-probes")
    assert code == 0 and report["site"] == str(package.parent) and report["changed"], (report, err)
    assert "editable checkout" in report["published_files"]
    code, report, err = cli("revert", "--engine", "sglang", "--site", str(site), "--no-probes")
    assert code == 0 and {p: p.read_bytes() for p in package.rglob("*.py")} == before, (report, err)


@pytest.mark.wheels
def test_a_checkout_of_a_release_the_patch_set_has_no_hashes_for_changes_nothing(tmp_path: Path) -> None:
    """A source build with its own version (a dev tag): nothing proves its files are as published,
    so every family with a variant is a conflict, and nothing is written."""
    python, package = editable(tmp_path, "sglang", "0.5.9")
    dist = next(Path(python).parent.parent.glob("lib/python*/site-packages/sglang-0.5.9.dist-info"))
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9.dev7+g1234abc\n")
    before = {p: p.read_bytes() for p in package.rglob("*.py")}
    code, report, err = cli("apply", "--engine", "sglang", "--python", python, "--no-probes", "--allow-untested")
    assert report and "ships no published hashes" in report["published_files"], err
    assert code == 1 and report["changed"] == []
    states = {f["state"] for f in report["families"]}
    assert "conflict" in states and "applied" not in states
    seen = cli("verify", "--engine", "sglang", "--python", python, "--no-probes")[1]["families"]
    assert [f["state"] for f in seen] == [f["state"] for f in report["families"]]
    assert {p: p.read_bytes() for p in package.rglob("*.py")} == before
