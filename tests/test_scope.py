"""patcher/core/scope.py and the families' scope.json: where a family's behaviour lives.

The recorded signatures are the wheels' (every covered release a variant declares); a release
whose signature is none of its variant's is ``unknown``, never matched by hunks alone (issue 41:
SGLang 0.5.12's MLA drafter class, 0.5.17's llama_eagle3 reading norm_before_fc, 0.5.4.post2's
auto-enable reaching the SM120 gate); scope.json is input, validated like the manifest.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from patcher.core import manifest, matrix, plan, release_files, scope
from patcher.core.plan import State
from patcher.environment import engines
from patcher.errors import ManifestError
from patcher.maintainer import leave_out, scope_lock, wheels


@pytest.mark.wheels
def test_every_scope_json_is_what_the_wheels_say() -> None:
    assert scope_lock.main(["--check"]) == 0


def test_families_with_a_scope() -> None:
    """The families whose behaviour grew outside their hunks in our own history (leave-one-out)."""
    with_scope = {f.id for f in manifest.load_all() if f.scope is not None}
    assert {"vllm/mla-aux-capture", "vllm/eagle31-switches", "vllm/sm120-allreduce-fusion",
            "sglang/eagle3-drafter-guards", "sglang/eagle3-loud-fc-skip", "sglang/sm120-allreduce-fusion"} <= with_scope


@pytest.mark.parametrize("bad", ["{not json", "[]", '{"g1": {}}', '{"g1": [{"x/../y.py": []}]}',
                                 '{"g1": [{"sglang/srt/models/a.py": ["not a read"]}]}'])
def test_an_altered_scope_json_is_a_manifest_error(tmp_path: Path, bad: str) -> None:
    src = manifest.PATCHES / "sglang" / "eagle3-drafter-guards"
    folder = tmp_path / "sglang" / "eagle3-drafter-guards"
    shutil.copytree(src, folder)
    shutil.copyfile(manifest.PATCHES / "sglang" / "releases.txt", tmp_path / "sglang" / "releases.txt")
    (folder / "scope.json").write_text(bad)
    with pytest.raises(ManifestError, match="scope"):
        manifest.load(folder)


@pytest.mark.wheels
@pytest.mark.parametrize(("version", "family", "said"), [
    ("0.5.12", "eagle3-drafter-guards", "sglang/srt/models/kimi_k25_eagle3.py is new in scope"),
    ("0.5.17", "eagle3-drafter-guards", "sglang/srt/models/llama_eagle3.py now holds norm_before_fc"),
    ("0.5.5.post1", "sm120-allreduce-fusion", "sglang/srt/server_args.py now holds is_blackwell_supported"),
])
def test_a_variant_matched_by_its_hunks_where_the_scope_moved_is_unknown(tmp_path: Path, version: str, family: str,
                                                                         said: str) -> None:
    root = leave_out.cut(manifest.PATCHES, "sglang", version, tmp_path / "patches")
    fam = next(f for f in manifest.load_all(root, ("sglang",)) if f.name == family)
    files = release_files.Files(engines.find("sglang", site=wheels.tree("sglang", version)))
    st = plan.undeclared(fam, files, Version(version))
    assert st.state is State.UNKNOWN and said in st.detail, st.detail
    assert "--skip" in st.hint
    # with what ships, the release is declared and the signature is its variant's
    shipped = next(f for f in manifest.load_all(manifest.PATCHES, ("sglang",)) if f.name == family)
    entry = shipped.classify(Version(version))
    assert scope.signature(shipped.scope, files) in shipped.scope.signatures[entry.id]


def test_a_signature_reads_only_files_in_scope(tmp_path: Path) -> None:
    site = tmp_path / "site"
    for rel, text in {"eng/models/drafter.py": "class FooForCausalLMEagle3(X):\n    norm_output = 1\nEntryClass = []\n",
                      "eng/models/target.py": "def set_eagle3_layers_to_capture(): pass\nEntryClass = []\n",
                      "eng/other/drafter.py": "class BarForCausalLMEagle3(X):\nEntryClass = []\n"}.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    record = {rel: "" for rel in ("eng/models/drafter.py", "eng/models/target.py", "eng/other/drafter.py")}
    install = engines.Install("eng", Version("1.0"), site, site / "eng-1.0.dist-info", record, None, None, None, None)
    sc = manifest.Scope("drafters", ("eng/models",), ("EntryClass",), ("ForCausalLMEagle3(",),
                        ("norm_output", "fc_norm"), {})
    assert scope.signature(sc, release_files.Files(install)) == {"eng/models/drafter.py": ("norm_output",)}
    assert json.dumps(scope.signature(sc, release_files.Files(install)))  # what scope_lock writes


# --- the hand-written signature, recorded per input (issue 57) ---------------------------------------

def _toy_files(root: Path, version: str = "1.0", record_extra: str = "") -> release_files.Files:
    rels = {"toyengine/models/a.py": "class Drafter:\n    norm_before_fc = True\n",
            "toyengine/models/b.py": "class Other:\n    pass\n", "toyengine/c.py": "norm_before_fc\n"}
    for rel, text in rels.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    dist = root / f"toyengine-{version}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "RECORD").write_text("".join(f"{rel},,\n" for rel in rels) + record_extra)
    return release_files.Files(engines.Install("toyengine", Version(version), root, dist, dict.fromkeys(rels, ""),
                                               None, None, None, None))


HAND = manifest.Scope("the drafter's switches", ("toyengine/models",), ("class",), (), ("norm_before_fc",), {})


def test_a_recorded_hand_signature_is_read_until_one_input_changes(tmp_path: Path, monkeypatch) -> None:
    """Each input of the key, changed alone, makes the signature computed again: the code that reads it,
    each field of the [scope] (where, which strings), the release (its version, its RECORD);
    unchanged, it is read back."""
    from dataclasses import replace

    cache, files = tmp_path / "cache", _toy_files(tmp_path / "s")
    fresh = scope_lock.cached_hand_signature(HAND, files, cache=cache, code="code-1")
    assert fresh == scope.signature(HAND, files) == {"toyengine/models/a.py": ("norm_before_fc",),
                                                      "toyengine/models/b.py": ()}
    assert len(list(cache.iterdir())) == 1

    def computed(*_a, **_k):
        raise AssertionError("computed again")

    monkeypatch.setattr(scope, "signature", computed)
    assert scope_lock.cached_hand_signature(HAND, files, cache=cache, code="code-1") == fresh
    changed = {
        "the code": (HAND, files, "code-2"),
        "under": (replace(HAND, under=("toyengine",)), files, "code-1"),
        "all": (replace(HAND, all=("class Drafter",)), files, "code-1"),
        "any": (replace(HAND, any=("pass",)), files, "code-1"),
        "reads": (replace(HAND, reads=("norm_before_fc", "fc_norm")), files, "code-1"),
        "the version": (HAND, _toy_files(tmp_path / "v", "1.1"), "code-1"),
        "the RECORD": (HAND, _toy_files(tmp_path / "r", record_extra="toyengine/d.py,,\n"), "code-1"),
    }
    for what, (hand, on, code) in changed.items():
        with pytest.raises(AssertionError, match="computed again"):
            scope_lock.cached_hand_signature(hand, on, cache=cache, code=code)
            pytest.fail(f"{what} changed alone, and the recorded signature still answered")


def test_a_damaged_hand_record_is_computed_again(tmp_path: Path) -> None:
    cache, files = tmp_path / "cache", _toy_files(tmp_path / "s")
    fresh = scope_lock.cached_hand_signature(HAND, files, cache=cache, code="c")
    for bad in ("{not json", '{"a.py": "x"}', "[]", '{"a.py": [1]}'):
        (entry,) = cache.iterdir()
        entry.write_text(bad)
        assert scope_lock.cached_hand_signature(HAND, files, cache=cache, code="c") == fresh


@pytest.mark.wheels
def test_the_recorded_hand_signatures_are_the_fresh_ones_on_the_newest_releases() -> None:
    """A recorded answer that differs from a fresh one fails: on the newest release of each engine,
    every family with a [scope], recorded (as scope_lock --check and leave_out's cut read it) and
    computed anew."""
    for engine in manifest.ENGINES:
        fams = [f for f in manifest.load_all(manifest.PATCHES, (engine,)) if f.scope is not None]
        newest = max(Version(v) for v in matrix.releases(engine))
        files = release_files.Files(engines.find(engine, site=wheels.tree(engine, str(newest))))
        assert fams
        for fam in fams:
            assert scope_lock.cached_hand_signature(fam.scope, files) == scope.signature(fam.scope, files), fam.id
