"""One real release per engine end to end: SGLang 0.5.9 and vLLM 0.15.1 installed by pip
(--no-deps) into a venv, then the CLI applies, verifies and reverts; the install ends
byte-identical to RECORD."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from patcher.cli.main import main
from patcher.environment.engines import find, sha256_record

RELEASES = {"sglang": ("0.5.9", "sglang/eagle3-drafter-keys"), "vllm": ("0.15.1", "vllm/mla-aux-capture")}


@pytest.fixture(scope="module", params=sorted(RELEASES))
def engine_python(request, tmp_path_factory):
    engine = request.param
    root = tmp_path_factory.mktemp(engine)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-compile", f"{engine}=={RELEASES[engine][0]}"], check=True)
    return engine, str(python)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def record_mismatches(engine: str, python: str) -> list[str]:
    install = find(engine, python=python)
    bad = []
    for rel, digest in install.record.items():
        p = install.site / rel
        if digest and p.suffix == ".py" and sha256_record(p.read_bytes()) != digest:
            bad.append(rel)
    return bad


@pytest.mark.full
@pytest.mark.wheels
def test_apply_verify_revert_on_a_published_release(engine_python):
    engine, python = engine_python
    release, family = RELEASES[engine]
    assert record_mismatches(engine, python) == []
    code, out, err = cli("verify", "--engine", engine, "--python", python, "--json")
    before = json.loads(out)[0]
    assert before["version"] == release and code == 1
    pending = {f["id"] for f in before["families"] if f["state"] == "pending"}
    assert family in pending

    code, out, err = cli("apply", "--engine", engine, "--python", python, "--json")
    report = json.loads(out)[0]
    states = {f["id"]: f["state"] for f in report["families"]}
    assert all(states[i] == "applied" for i in pending), states
    assert report["changed"]
    # Without torch in this venv the modules cannot import: reported as such, never as passed.
    probes = [p for f in report["families"] for p in f["probes"]]
    assert probes and all(p["status"] == "not importable" for p in probes), probes
    assert code == 0, err

    code, out, _ = cli("apply", "--engine", engine, "--python", python, "--json")
    assert json.loads(out)[0]["changed"] == [] and code == 0

    code, out, _ = cli("verify", "--engine", engine, "--python", python, "--strict")
    assert code == 1  # --strict: probes that cannot import are not a proof
    assert "not importable: missing module" in out

    code, out, _ = cli("revert", "--engine", engine, "--python", python)
    assert code == 0, out
    assert record_mismatches(engine, python) == []
