"""patcher/installer/actions.py: what apply, verify and revert decide and report, on a real pip install of the
toy engine: requirements and --strict, revert's RECORD check, our earlier diff told from a hand
edit, refusals, untested releases. The same decisions on in-memory installs: test_plan.py; the
whole life of an install across pip upgrades: test_lifecycle.py.

Each docstring names the break of the code that makes the test fail
(benchmarks/guarantee_breaks.py re-runs those breaks).
"""

from __future__ import annotations

from patcher.core import write
from patcher.core.plan import State
from patcher.installer import actions
from tests.support import toy, toy_venv
from tests.support.toy_venv import cli, family, install, only

venv = toy_venv.venv


# --- requires: blocked, warning, --strict

REQUIRES = """
[[requires]]
distribution = "toydep"
versions = ">=2.0"
severity = "{severity}"
why = "toy needs toydep 2"
"""


def test_blocked_precondition_applies_nothing_and_exits_1(venv, tmp_path):
    """Broken by: plan._preconditions ignoring severity="blocked" (the family is then applied)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches", REQUIRES.format(severity="blocked"))
    core = site / "toyengine" / "core.py"
    before = core.read_bytes()
    r = actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches))
    st = only(r)
    assert st.state is State.BLOCKED and r.changed == [] and r.exit_code(False) == 1
    assert "wanted toydep>=2.0, found no toydep" in st.detail and st.hint == "pip install 'toydep>=2.0'"
    assert core.read_bytes() == before


def test_warning_is_exit_0_and_exit_1_with_strict(venv, tmp_path):
    """Broken by: Report.exit_code ignoring warnings under --strict."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches", REQUIRES.format(severity="warning"))
    base = ("--engine", "all", "--python", str(python), "--patches", str(patches), "--json")
    code, out, err = cli("apply", *base)
    assert code == 0, err
    (fam,) = out[0]["families"]
    assert fam["state"] == "applied" and any("toydep" in w for w in fam["warnings"])
    assert toy.run_value(python) == 2
    code, out, err = cli("verify", *base, "--strict")
    assert code == 1 and out[0]["exit"] == 1
    code, out, err = cli("verify", *base)
    assert code == 0


# --- revert gives the published file or nothing

def test_revert_refuses_when_it_would_not_give_the_published_file(venv, tmp_path):
    """Broken by: actions' RECORD check before revert writes (the hand edit is then 'reverted' into a
    file no wheel ever had). Without the state file only that check can tell the edit from our lines;
    the family is then left as it is, a conflict (exit 1) naming the file (README: one rule)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    opts = actions.Options(python=str(python), patches=patches, probes=False)
    actions.apply(toy.ENGINE, opts)
    (site / write.DIRNAME / f"{toy.ENGINE}.json").unlink()
    core = site / "toyengine" / "core.py"
    core.write_text(core.read_text().replace('return "toy"', 'return "hand edit"'))  # outside the hunk
    before = core.read_bytes()
    code, out, err = cli("revert", "--engine", "all", "--python", str(python),
                         "--patches", str(patches), "--json")
    (fam,) = out[0]["families"]
    assert code == 1 and out[0]["changed"] == [] and fam["state"] == "conflict"
    assert fam["detail"].startswith("toyengine/core.py changed since apply")
    assert fam["hint"].endswith(f"{python} -m pip install --force-reinstall --no-deps toyengine==1.0")
    assert core.read_bytes() == before


# --- conflicts, refusals and untested releases

def test_our_earlier_diff_is_told_apart_from_a_hand_edit(venv, tmp_path):
    """A file an earlier patcher release wrote with a diff we have since changed is not "someone
    edited them": the state file's hashes say it is ours. A real hand edit still says so.
    Broken by: plan._from_files without the _written_by_us branch (the hand-edit wording then)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    opts = actions.Options(python=str(python), patches=patches, probes=False)
    actions.apply(toy.ENGINE, opts)
    diff = patches / toy.ENGINE / "fix" / "v1.diff"
    diff.write_text(diff.read_text().replace("+    return 2", "+    return 3"))  # "the next release of ours"
    st = only(actions.verify(toy.ENGINE, opts))
    assert st.state is State.CONFLICT
    assert "as an earlier patcher release wrote it on 1.0" in st.detail and "variant v1 differs" in st.detail
    assert "our diff changed since" in st.hint and "someone" not in st.hint
    core = site / "toyengine" / "core.py"
    core.write_text(core.read_text().replace('return "toy"', 'return "hand edit"'))
    st = only(actions.verify(toy.ENGINE, opts))
    assert st.state is State.CONFLICT and st.detail.startswith("files are neither published nor ours")
    assert st.hint.startswith("someone edited them")


def test_refusal_whose_evidence_does_not_hold_says_so(venv, tmp_path):
    """A release in a refused range whose files contradict the refusal's evidence: still refused
    (never patched by version alone), with the contradiction as a warning.
    Broken by: plan.assess dropping the refusal-evidence warning."""
    python, site = venv
    install(python, tmp_path, "0.5")  # refused "<1.0" because "core lacks def value"; this one has it
    patches = family(tmp_path / "patches")
    r = actions.verify(toy.ENGINE, actions.Options(python=str(python), patches=patches))
    st = only(r)
    assert st.state is State.REFUSED and r.exit_code(False) == 1
    assert st.warnings == ["the refusal's evidence does not hold here: toyengine/core.py contains 'def value'"]


def test_untested_release_matching_a_pre_image_names_the_flag(venv, tmp_path):
    """Survivor plan._unknown hint mutants: the hint is what tells the user how to proceed."""
    python, site = venv
    install(python, tmp_path, "3.0")
    st = only(actions.verify(toy.ENGINE, actions.Options(python=str(python), patches=family(tmp_path / "p"))))
    assert st.state is State.UNKNOWN and st.hint == (f"'patcher apply --allow-untested --python {python}' applies it "
                                                     "(its pre-image matches byte for byte) and exits 0")


def test_untested_release_with_our_post_image_and_no_record_is_upstream(venv, tmp_path):
    """An untested release whose files hold our variant's text while our bookkeeping records nothing
    of ours: the release ships it (upstream took the fix verbatim), so the state is upstream, never
    'applied' (issue 41: states from facts we own). The upstream evidence is made to differ from
    our post-image so only the variant's text can explain the files."""
    python, site = venv
    install(python, tmp_path, "3.0", toy.PATCHED)
    patches = family(tmp_path / "p")
    manifest_file = patches / toy.ENGINE / "fix" / "patch.toml"
    manifest_file.write_text(manifest_file.read_text().replace('contains = ["return 2"]', 'contains = ["return 3"]'))
    st = only(actions.verify(toy.ENGINE, actions.Options(python=str(python), patches=patches)))
    assert st.state is State.UPSTREAM and st.untested and "nothing of ours was written here" in st.detail
    assert st.probes and st.probes[0]["status"] == "passed"


def test_untested_release_that_no_variant_fits_names_the_nearest(venv, tmp_path):
    """Survivor plan._unknown `in_place = ""` (returned a string for a status here)."""
    python, site = venv
    install(python, tmp_path, "3.0", toy.MODULE_V1.replace("return 1", "return 7"))
    st = only(actions.verify(toy.ENGINE, actions.Options(python=str(python), patches=family(tmp_path / "p"))))
    assert st.state is State.UNKNOWN and st.variant == "v1"
    assert st.detail.startswith("no variant declared for 3.0; nearest is v1")


def test_the_restore_hint_is_pasteable_where_it_is_shown() -> None:
    """Issue 58 item 6: a bare 'pip install ...' reinstalled into whatever environment the shell had;
    a checkout's hint said 'git checkout -- FILE' with a literal FILE."""
    from dataclasses import replace as with_
    from pathlib import Path

    from packaging.version import Version

    from patcher.environment import engines
    from patcher.installer.actions import _restore

    wheel = engines.Install("vllm", Version("0.34.0"), Path("/env/lib/site-packages"), Path("/env/x.dist-info"), {},
                            "/env/bin/python", "3.12", None, None)
    assert _restore(wheel, ["vllm/a.py"]) == "/env/bin/python -m pip install --force-reinstall --no-deps vllm==0.34.0"
    checkout = with_(wheel, truth="the hashes vllm 0.34.0 published")
    assert _restore(checkout, ["vllm/a.py", "vllm/b.py"]).endswith("checkout -- vllm/a.py vllm/b.py)")
