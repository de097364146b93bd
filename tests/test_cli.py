"""The CLI through main(argv): exit codes and the exact error lines."""

from __future__ import annotations

import io
import json
import shutil

import pytest

from patcher.__main__ import main
from patcher.maintainer import wheels


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_engine_not_installed_is_exit_2_with_wanted_found_hint(tmp_path):
    code, out, err = cli("verify", "--engine", "vllm", "--site", str(tmp_path))
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "error: vllm is not installed",
        "  wanted: a vllm distribution",
        f"  found:  none (site: {tmp_path})",
        "  hint:   install it first, or pass --python / --site for the right environment",
    ]


def test_missing_site_dir_is_exit_2(tmp_path):
    code, _, err = cli("verify", "--engine", "vllm", "--site", str(tmp_path / "nope"))
    assert code == 2 and err.startswith(f"error: {tmp_path / 'nope'} is not a directory")


def test_unknown_family_is_exit_2():
    code, _, err = cli("apply", "--only", "nope", "--site", str(wheels.tree("sglang", "0.5.9")), "--engine", "sglang")
    assert code == 2 and err.splitlines()[0] == "error: no patch family 'nope'"


def test_bad_flag_is_exit_2():
    code, _, _ = cli("verify", "--frobnicate")
    assert code == 2


def test_list_json_names_every_family():
    code, out, _ = cli("list", "--json")
    ids = {f["id"] for f in json.loads(out)["families"]}
    assert code == 0 and "sglang/eagle3-drafter-keys" in ids and "vllm/eagle3-target-whitelist" in ids


@pytest.mark.wheels
def test_dry_run_writes_nothing_and_prints_the_plan(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(wheels.tree("sglang", "0.5.9"), site)
    before = {p: p.read_bytes() for p in site.rglob("*.py")}
    code, out, _ = cli("apply", "--engine", "sglang", "--site", str(site), "--dry-run", "--no-probes")
    assert code == 0 and "would apply: " in out and "sglang/srt/models/llama_eagle3.py" in out
    assert {p: p.read_bytes() for p in site.rglob("*.py")} == before
    assert not (site / ".kimi-patcher").exists()


@pytest.mark.wheels
def test_verify_is_read_only_and_reports_pending(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(wheels.tree("sglang", "0.5.9"), site)
    code, out, err = cli("verify", "--engine", "sglang", "--site", str(site), "--json")
    report = json.loads(out)
    assert code == 1 and err == ""
    assert {f["id"]: f["state"] for f in report[0]["families"]}["sglang/eagle3-drafter-keys"] == "pending"
    assert not (site / ".kimi-patcher").exists()


@pytest.mark.wheels
def test_refused_release_names_the_release_to_use(tmp_path):
    code, out, _ = cli("verify", "--engine", "vllm", "--site", str(wheels.tree("vllm", "0.10.2")), "--no-probes")
    assert code == 1
    assert "refused" in out and "use 0.11.1 or newer" in out
