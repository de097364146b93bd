"""One real engine release end to end: SGLang 0.5.9 installed by pip (--no-deps) into a venv,
then the CLI applies, verifies and reverts; the install ends byte-identical to RECORD."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from patcher.__main__ import main
from patcher.engines import find, sha256_record

RELEASE = "0.5.9"


@pytest.fixture(scope="module")
def engine_python(tmp_path_factory):
    root = tmp_path_factory.mktemp("sglang")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    f"sglang=={RELEASE}"], check=True)
    return str(python)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def record_mismatches(python: str) -> list[str]:
    install = find("sglang", python=python)
    bad = []
    for rel, digest in install.record.items():
        p = install.site / rel
        if digest and p.suffix == ".py" and sha256_record(p.read_bytes()) != digest:
            bad.append(rel)
    return bad


@pytest.mark.wheels
def test_apply_verify_revert_on_published_sglang(engine_python):
    assert record_mismatches(engine_python) == []
    code, out, err = cli("verify", "--engine", "sglang", "--python", engine_python, "--json")
    before = json.loads(out)[0]
    assert before["version"] == RELEASE and code == 1
    pending = {f["id"] for f in before["families"] if f["state"] == "pending"}
    assert "sglang/eagle3-drafter-keys" in pending

    code, out, err = cli("apply", "--engine", "sglang", "--python", engine_python, "--json")
    report = json.loads(out)[0]
    states = {f["id"]: f["state"] for f in report["families"]}
    assert all(states[i] == "applied" for i in pending), states
    assert report["changed"]
    # Without torch in this venv the modules cannot import: reported as such, never as passed.
    probes = [p for f in report["families"] for p in f["probes"]]
    assert probes and all(p["status"] == "not importable" for p in probes), probes
    assert code == 0, err

    code, out, _ = cli("apply", "--engine", "sglang", "--python", engine_python, "--json")
    assert json.loads(out)[0]["changed"] == [] and code == 0

    code, out, _ = cli("verify", "--engine", "sglang", "--python", engine_python, "--strict")
    assert code == 1  # --strict: probes that cannot import are not a proof
    assert "not importable: missing module" in out

    code, out, _ = cli("revert", "--engine", "sglang", "--python", engine_python)
    assert code == 0, out
    assert record_mismatches(engine_python) == []
