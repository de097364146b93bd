"""A release nobody wrote a variant for (issue 31), on the real wheels.

- Every covered release is placed by content in its declared entry and in no other: no second
  upstream or refused entry's evidence holds there (two entries matching one release is a
  manifest error, never a first-match win).
- Leave one out: the patch set cut back to what was known before each release where an entry
  begins (and the newest two), with no human edit, judges and ports it as what ships, or flags a
  family for review (patcher/maintainer/leave_out.py); never wrong.
- vLLM 0.34.0 judged with what was known before it: the family nobody can place is left as it is
  and every other one applies; its hint's --skip gives exit 0.
"""

from __future__ import annotations

import shutil

import pytest
from packaging.version import Version

from patcher import engine_specs
from patcher.core import manifest, matrix, plan, release_files, scope
from patcher.core.plan import State
from patcher.doctor import command_checks
from patcher.engine_specs.vllm import launch as vllm_launch
from patcher.environment import engines
from patcher.installer import actions
from patcher.maintainer import leave_out, wheels
from patcher.maintainer.port_proof import scratch_site
from tests.support.tiers import release_param

RELEASES = [(e, v) for e in manifest.ENGINES for v in matrix.releases(e)]
# Every release where an entry of either engine begins (derived from the manifests, not listed
# here), and the newest two: each was once a release nobody had written a variant for.
LEFT_OUT = sorted({(e, v) for e in manifest.ENGINES for v in [*leave_out.boundaries(e), *matrix.releases(e)[-2:]]},
                  key=lambda ev: (ev[0], Version(ev[1])))


@pytest.mark.wheels
@pytest.mark.parametrize("engine", manifest.ENGINES)
def test_content_places_each_release_in_its_own_entry_only(engine):
    fams = manifest.load_all(manifest.PATCHES, (engine,))
    wrong = []
    for version in matrix.releases(engine):
        files = release_files.Files(engines.find(engine, site=wheels.tree(engine, version)))
        for fam in fams:
            declared = fam.classify(files.install.version)
            others = [e for e in plan.matching(fam, files) if e is not declared and not isinstance(e, manifest.Variant)]
            wrong += [f"{engine} {version} {fam.name}: declared {declared.versions}, and the evidence of "
                      f"'{e.versions}' holds too" for e in others]
    assert not wrong, "\n".join(wrong)


@pytest.mark.full
@pytest.mark.wheels
@pytest.mark.parametrize("engine, version", LEFT_OUT, ids=[f"{e}-{v}" for e, v in LEFT_OUT])
def test_leaving_a_release_out_is_never_wrong(engine, version):
    """Issue 41: at every entry boundary, the installer's verdict and port's output on the
    release's published files, with what was known before it, are what ships (port's output
    applied and compared byte for byte), or a family flagged for a person; never wrong. The cut
    forgets the release's own scope signatures and hashes (issue 55)."""
    _never_wrong(leave_out.judge(engine, version), engine)


@pytest.mark.full
@pytest.mark.wheels
@pytest.mark.parametrize("engine, version", LEFT_OUT, ids=[f"{e}-{v}" for e, v in LEFT_OUT])
def test_leaving_two_releases_out_is_never_wrong(engine, version):
    """Issue 55: the same, two releases on: the release before each boundary is not known either.
    With the scope derived from the hunks (patcher/core/derived_scope.py) and the hand-written one,
    judged without port at the boundaries: 0 wrong, 152 of 300 cells flagged two releases on, 142
    one on (95 and 84 with the hand-written scope alone, which was written knowing the answers)."""
    _never_wrong(leave_out.judge(engine, version, back=2), engine)


def _never_wrong(rows, engine):
    assert {r.family for r in rows} == {f.name for f in manifest.load_all(manifest.PATCHES, (engine,))}
    wrong = [f"{r.family}: ships {r.shipped}, judged {r.judged}, port {r.ported}: {r.why}"
             for r in rows if r.verdict == "wrong"]
    assert not wrong, "\n".join(wrong)


def test_the_cut_drops_what_was_known_only_from_the_release_on(tmp_path):
    root = leave_out.cut(manifest.PATCHES, "vllm", "0.34.0", tmp_path / "patches")
    fams = {f.name: f for f in manifest.load_all(root, ("vllm",))}
    assert matrix.releases("vllm", root)[-1] == "0.33.0"
    assert [str(u.versions) for u in fams["mla-aux-capture"].upstream] == ["<0.20.0,>=0.18.0", "<0.34.0,>=0.20.0"]
    root = leave_out.cut(manifest.PATCHES, "vllm", "0.27.0", tmp_path / "p27")
    fams = {f.name: f for f in manifest.load_all(root, ("vllm",))}  # D9 gone, and from the probes' `when`
    assert "D9" not in {v.id for v in fams["sm120-allreduce-fusion"].variants}
    assert all("D9" not in p.when for p in fams["sm120-allreduce-fusion"].probes)


@pytest.mark.wheels
def test_the_cut_forgets_the_judged_release_s_scope_signature_and_hashes(tmp_path):
    """Issue 55: the shipped scope.json keeps, for D9, the signature of 0.34.0 itself; the cut before
    0.34.0 recomputes it from the releases before (none of them has 0.34.0's signature), and its
    published.json holds no hash of 0.34.0. Broken by: a cut that only drops the cut variants' ids."""
    import json

    shipped = {f.name: f for f in manifest.load_all(manifest.PATCHES, ("vllm",))}["sm120-allreduce-fusion"]
    assert shipped.scope is not None
    own = scope.signature(shipped.scope, release_files.Files(engines.find("vllm", site=wheels.tree("vllm", "0.34.0"))))
    assert own in shipped.scope.signatures["D9"]  # what only 0.34.0 taught
    root = leave_out.cut(manifest.PATCHES, "vllm", "0.34.0", tmp_path / "patches")
    cut = {f.name: f for f in manifest.load_all(root, ("vllm",))}["sm120-allreduce-fusion"]
    assert cut.scope is not None and cut.scope.signatures["D9"] and own not in cut.scope.signatures["D9"]
    published = json.loads((root / "vllm" / "published.json").read_text())
    assert "0.34.0" not in published and "0.33.0" in published


@pytest.mark.wheels
def test_an_unknown_family_on_a_new_release_never_blocks_the_others(tmp_path):
    """vLLM 0.34.0 with the patch set as it was before it: mla-aux-capture's evidence names a file
    0.34.0 removed, E7's compile-hash hunk finds 0.34.0's compile_factors in place of compute_hash,
    and D9's hunks fit but its scope moved (0.34.0's own signature is not known before it: the
    honest cut, issue 55), so nothing places any of the three; the upstream families stand, the
    note says which families were left, and the hint's --skip gives exit 0."""
    tree = wheels.tree("vllm", "0.34.0")
    install = engines.find("vllm", site=tree)
    root = leave_out.cut(manifest.PATCHES, "vllm", "0.34.0", tmp_path / "patches")
    rels = {fp.path for f in manifest.load_all(root, ("vllm",)) for v in f.variants for fp in f.patches[v.id]}
    files = release_files.Files(install)
    rels |= {r for f in manifest.load_all(root, ("vllm",)) for r in release_files.evidence_paths(files, f)}
    rels |= {r for f in manifest.load_all(root, ("vllm",)) if f.scope  # where each family's behaviour lives
             for r in scope.signature(f.scope, release_files.Files(install))}
    site = scratch_site(tree, install, {r for r in rels if (tree / r).is_file()}, tmp_path / "site")
    opts = actions.Options(site=site, probes=False, patches=root, allow_untested=True)
    r = actions.apply("vllm", opts)
    states = {s.family.name: s.state for s in r.statuses}
    unknown = ("eagle3-config-aux-ids", "mla-aux-capture", "sm120-allreduce-fusion")
    assert {n for n, st in states.items() if st is State.UNKNOWN} == set(unknown)
    assert {st for n, st in states.items() if n not in unknown} == {State.UPSTREAM}
    assert r.exit_code(False) == 1 and r.changed == []  # nothing written that nothing vouches for
    assert ("left as they are (unknown on 0.34.0): vllm/eagle3-config-aux-ids, vllm/mla-aux-capture, "
            "vllm/sm120-allreduce-fusion") in r.notes[-1]
    (mla,) = [s for s in r.statuses if s.family.name == "mla-aux-capture"]
    # one command for every family nothing places (issue 41: a --skip naming one of them exited 1)
    assert mla.hint.startswith("'patcher apply --skip eagle3-config-aux-ids --skip mla-aux-capture "
                               f"--skip sm120-allreduce-fusion --site {site}' applies the other families and exits 0")
    r = actions.apply("vllm", actions.Options(site=site, probes=False, patches=root, allow_untested=True,
                                              skip=unknown))
    assert r.exit_code(False) == 0 and r.changed == []  # nothing left that blocks
    shutil.rmtree(site)


@pytest.mark.parametrize("engine, version", [release_param("vllm", "0.34.0")])
def test_vllm_0_34_0_is_a_covered_release(engine, version):
    """0.34.0 is in the matrix: no flag is needed to apply what it needs (VERSIONS.md has its row)."""
    assert version in matrix.releases(engine)
    assert f"| {version} |" in (matrix.ROOT / "VERSIONS.md").read_text()


@pytest.mark.wheels
@pytest.mark.parametrize("version, runners, refused", [
    ("0.11.0", ("v1",), False), ("0.12.0", ("v1", "v2"), False), ("0.33.0", ("v1", "v2"), False),
    ("0.34.0", ("v2",), True)])
def test_which_runners_a_release_ships_is_read_from_its_files(version, runners, refused):
    """Not a version threshold: 0.34.0 removed the v1 runner and refuses VLLM_USE_V2_MODEL_RUNNER=0
    at start-up (platforms/interface.py), with no entry for the variable in envs.py."""
    from packaging.version import Version

    site = wheels.tree("vllm", version)
    assert vllm_launch.vllm_runners(Version(version), site) == runners
    assert vllm_launch.v2_env_refused(site) is refused
    var = command_checks.variables(engine_specs.spec("vllm"), site)[vllm_launch.V2_RUNNER_ENV]
    assert (var.only == "1") is refused
    got = vllm_launch.vllm_runner(Version(version), {vllm_launch.V2_RUNNER_ENV: "0"}, var, ("DeepseekV3ForCausalLM",),
                                   runners=runners, refuses_v2_env=refused)
    assert got.name == ("refused" if refused else "v1")
    unset = vllm_launch.vllm_runner(Version(version), {}, var, ("DeepseekV3ForCausalLM",), runners=runners,
                                     refuses_v2_env=refused)
    assert unset.name == {"0.11.0": "v1", "0.12.0": "v1", "0.33.0": "v2", "0.34.0": "v2"}[version]


@pytest.mark.wheels
def test_an_unknown_capture_family_is_never_read_as_captures_nothing(tmp_path):
    """vLLM 0.34.0 judged with the patch set as it was before it: mla-aux-capture is unknown there
    (its evidence names a removed file). The drafter check must not turn that into "the target
    captures nothing" (a false no-go): what it captures is not known. With what ships for 0.34.0
    the family is upstream and the target captures the drafter's ids on the v2 runner after apply."""
    from patcher.drafter import facts
    from patcher.release import release as drafter_release

    install = engines.find("vllm", site=wheels.tree("vllm", "0.34.0"))
    root = leave_out.cut(manifest.PATCHES, "vllm", "0.34.0", tmp_path / "patches")
    cut = drafter_release.from_install(install, patches=root)
    assert cut.state("mla-aux-capture") is State.UNKNOWN
    assert facts.capture(cut, facts.V2, None, [1, 29, 57], "DeepseekV3ForCausalLM", 61) is None
    shipped = facts.after_apply(drafter_release.from_install(install))
    cap = facts.capture(shipped, facts.V2, None, [1, 29, 57], "DeepseekV3ForCausalLM", 61)
    assert cap is not None and not cap.nothing and cap.eager == [1, 29, 57]


def test_a_release_whose_runner_files_moved_has_an_unknown_runner(tmp_path):
    """Check 7 of the review: runners are read from fixed files; a release that moves both is not
    'v2 only' (or v1), it is unknown."""
    from packaging.version import Version

    (tmp_path / "vllm").mkdir()
    runners = vllm_launch.vllm_runners(Version("0.40.0"), tmp_path)
    assert runners == ()
    got = vllm_launch.vllm_runner(Version("0.40.0"), {}, None, ("DeepseekV3ForCausalLM",), runners=runners)
    assert got.name == "unknown" and "moved" in got.why


@pytest.mark.wheels
def test_an_install_patched_by_the_variant_before_its_hash_diff_is_renewed_by_the_hint(tmp_path):
    """E5 had no compile-hash diff until 3 December (the GPU proof). An install patched with that E5
    is ours, not a hand edit: verify says so, and its hint (revert --only, then apply) renews it."""
    tree = wheels.tree("vllm", "0.26.0")
    install = engines.find("vllm", site=tree)
    old = tmp_path / "patches"
    shutil.copytree(manifest.PATCHES, old)
    toml = old / "vllm" / "eagle3-config-aux-ids" / "patch.toml"
    text = toml.read_text()
    before = 'id = "E5"\nversions = ">=0.26.0,<0.30.0"\ndiffs = ["v2-reader-dflash.diff", "hash-eagle-config.diff"]'
    assert before in text
    toml.write_text(text.replace(before, 'id = "E5"\nversions = ">=0.26.0,<0.30.0"\ndiffs = ["v2-reader-dflash.diff"]'))
    family = ("vllm/eagle3-config-aux-ids",)
    rels = {"vllm/config/speculative.py", "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"}
    site = scratch_site(tree, install, rels, tmp_path / "site")
    first = actions.apply("vllm", actions.Options(site=site, probes=False, patches=old, only=family))
    assert first.exit_code(False) == 0
    opts = actions.Options(site=site, probes=False, only=family)
    (st,) = actions.verify("vllm", opts).statuses
    assert st.state is State.CONFLICT
    assert st.detail.startswith("holds variant E5 as an earlier patcher release wrote it on 0.26.0; this patcher's "
                                "variant E5 also changes vllm/config/speculative.py")
    assert st.hint == (f"'patcher revert --only vllm/eagle3-config-aux-ids --site {site}' then "
                       f"'patcher apply --site {site}' renews it")
    assert actions.revert("vllm", opts).exit_code(False) == 0
    r = actions.apply("vllm", opts)
    assert r.exit_code(False) == 0 and sorted(r.changed) == sorted(rels)


@pytest.mark.full
@pytest.mark.wheels
@pytest.mark.parametrize("engine, version", LEFT_OUT, ids=[f"{e}-{v}" for e, v in LEFT_OUT])
def test_every_hint_is_the_command_that_does_what_it_says(tmp_path, engine, version):
    """Issue 41: on the release left out, the hint verify prints for a family nothing places is
    one command; run as printed it exits 0, and what it wrote is what ships (the shipped patch
    set then reads every family applied, upstream or, where it was skipped, pending)."""
    import io
    import json
    import re
    import shlex

    from patcher.cli.main import main

    root = leave_out.cut(manifest.PATCHES, engine, version, tmp_path / "patches")
    site = tmp_path / "site"
    shutil.copytree(wheels.tree(engine, version), site)

    def run(*argv: str) -> tuple[int, dict]:
        out = io.StringIO()
        code = main([*argv, "--json", "--no-probes", "--patches", str(root)], out=out, err=io.StringIO())
        return code, json.loads(out.getvalue())[0]

    code, report = run("verify", "--engine", engine, "--site", str(site))
    hints = {f["hint"] for f in report["families"] if f["state"] == "unknown release"}
    commands = {m for h in hints for m in re.findall(r"'(patcher apply[^']*)'", h)}
    if not hints:
        return
    assert len(commands) == 1, hints  # one command, the same in every hint
    argv = shlex.split(commands.pop())[1:]
    assert "--site" in argv, argv
    code, after = run(*argv, "--engine", engine)
    says_zero = all("exits 0" in h for h in hints)
    # a family refused on this release stays a reason whatever is applied: the hint says so
    refused = {f["id"] for f in after["families"] if f["state"] == "refused"}
    assert (code == 0) is says_zero and (says_zero or refused), (hints, after.get("reasons"))
    assert all(any(fid in r for fid in refused) for r in after.get("reasons", [])), after.get("reasons")
    shipped = {s.family.name: s for s in plan.assess(engines.find(engine, site=site),
                                                      manifest.load_all(manifest.PATCHES, (engine,)), {})}
    skipped = {argv[i + 1] for i, a in enumerate(argv) if a == "--skip"}
    wrong = [f"{name}: {st.state} ({st.detail})" for name, st in shipped.items()
             if st.state not in (State.APPLIED, State.UPSTREAM, State.REFUSED)
             and not (name in skipped and st.state is State.PENDING)]
    assert not wrong, "\n".join(wrong)
