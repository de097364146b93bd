"""patcher/core/selection.py: which families a run acts on (--engine, --only, --skip, bare ids across
engines), and the usage errors for a selection that means nothing, through the CLI's exact lines."""

from __future__ import annotations

import json

import pytest

from tests.support.cli_on_release import cli, install


def test_unknown_family_is_exit_2():
    code, _, err = cli("apply", "--only", "nope", "--engine", "sglang")
    assert code == 2 and err.splitlines()[:3] == [
        "error: --only nope: no such patch family", "  wanted: an id from 'patcher list'", "  found:  nope"]


def test_a_misspelt_family_gets_a_did_you_mean():
    code, _, err = cli("verify", "--only", "k25-aux-captur")
    assert code == 2 and err.splitlines() == ["error: --only k25-aux-captur: no such patch family",
                                              "  wanted: an id from 'patcher list'", "  found:  k25-aux-captur",
                                              "  hint:   did you mean k25-aux-capture?"]


@pytest.mark.wheels
def test_a_bare_family_id_resolves_across_engines(tmp_path):
    site = install(tmp_path, "sglang", "0.5.5")
    code, out, _ = cli("verify", "--only", "k25-aux-capture", "--site", site, "--no-probes")
    assert code == 0 and out.splitlines()[1].startswith("  ok   sglang/k25-aux-capture: upstream: ")


@pytest.mark.wheels
def test_only_of_an_engine_not_installed_is_an_error(tmp_path):
    site = install(tmp_path, "sglang", "0.5.9")
    code, out, err = cli("verify", "--only", "vllm/mla-aux-capture", "--site", site, "--no-probes")
    assert code == 2 and out == "" and err.splitlines()[0] == "error: vllm is not installed"


def test_only_and_skip_of_one_family_is_a_usage_error():
    code, out, err = cli("verify", "--only", "sglang/k25-aux-capture", "--skip", "k25-aux-capture", "--json")
    assert code == 2 and json.loads(out)["exit"] == 2
    assert err.splitlines() == ["error: --only and --skip both name sglang/k25-aux-capture",
                                "  wanted: each family in at most one of them",
                                "  found:  --only sglang/k25-aux-capture --skip sglang/k25-aux-capture",
                                "  hint:   --only already leaves out every family it does not name"]


def test_only_of_another_engine_than_engine_is_a_usage_error():
    code, _, err = cli("verify", "--engine", "sglang", "--only", "vllm/mla-aux-capture")
    assert code == 2 and err.splitlines() == [
        "error: --only vllm/mla-aux-capture selects nothing with --engine sglang",
        "  wanted: a sglang family", "  found:  vllm/mla-aux-capture",
        "  hint:   drop --engine sglang, or name a sglang family"]
