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

from patcher.core import manifest, plan, release_files, scope
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
