"""`patcher port`: merge rules on small texts, the installer's import isolation, and ports proven
on real published releases (vLLM 0.27.0 from D8 alone; a release newer than releases.txt)."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from patcher.cli.main import main
from patcher.core import manifest
from patcher.environment import engines

ROOT = Path(__file__).resolve().parent.parent


def test_merge_carries_upstream_rename_into_our_copied_line():
    from patcher.maintainer import merge

    base = "def gate():\n    return (\n        is_sm90\n        and args_dict[\"fusion\"]\n    )\n"
    ours = base.replace("        is_sm90\n", "        (is_sm90 or (args_dict[\"fusion\"] and cap == 12))\n")
    theirs = base.replace('args_dict["fusion"]', "get_args().fusion")
    m = merge.merge_file("x.py", base, ours, theirs)
    assert m.conflicts == []
    assert 'args_dict["fusion"]' not in m.text  # a NameError on SM 12.x otherwise
    assert "(is_sm90 or (get_args().fusion and cap == 12))" in m.text
    assert "and get_args().fusion\n" in m.text


def test_merge_puts_both_insertions_at_one_place_upstream_first():
    from patcher.maintainer import merge

    base = "T = {\n    90: 1,\n}\n"
    ours = "T = {\n    90: 1,\n    120: 3,\n}\n"
    theirs = "T = {\n    90: 1,\n    107: 2,\n}\n"
    m = merge.merge_file("x.py", base, ours, theirs)
    assert m.text == "T = {\n    90: 1,\n    107: 2,\n    120: 3,\n}\n" and m.notes


def test_merge_joins_list_insertions_with_their_separator():
    from patcher.maintainer import merge

    base = 'x = ["a", "b"]\n'
    ours = 'x = [\n    "a",\n    "b",\n    "ours",\n]\n'
    theirs = 'x = [\n    "a",\n    "b",\n    "new",\n]\n'
    m = merge.merge_file("x.py", base, ours, theirs)
    assert m.text == 'x = [\n    "a",\n    "b",\n    "new",\n    "ours",\n]\n'
    assert ast.literal_eval(m.text.split("=", 1)[1].strip()) == ["a", "b", "new", "ours"]


def test_merge_leaves_real_conflicts_to_a_person():
    from patcher.maintainer import merge

    base = "if a:\n    go()\n"
    ours = "if b:\n    go()\n"
    theirs = "if c:\n    go()\n"  # the same word, replaced by both
    m = merge.merge_file("x.py", base, ours, theirs)
    assert m.text is None and m.conflicts and m.conflicts[0].line == 1


def test_new_variant_is_declared_for_the_release_and_its_probes(tmp_path):
    from patcher.maintainer import manifest_edit

    folder = manifest.PATCHES / "vllm" / "sm120-allreduce-fusion"
    text = manifest_edit.add_variant((folder / "patch.toml").read_text(), "D8", "D10", "0.27.0",
                                     ["0.26.0", "0.27.0", "0.28.0"])
    (tmp_path / "vllm" / "f").mkdir(parents=True)
    (tmp_path / "vllm" / "f" / "patch.toml").write_text(text)
    signatures = json.loads((folder / "scope.json").read_text())
    (tmp_path / "vllm" / "f" / "scope.json").write_text(json.dumps(signatures | {"D10": signatures["D8"]}))
    for name in ("D1", "D2", "D6", "D7", "D8", "D9", "D10"):
        (tmp_path / "vllm" / "f" / f"{name}.diff").write_text((folder / "D8.diff").read_text())
    fam = manifest.load(tmp_path / "vllm" / "f")  # no overlap: D9 gave 0.27.0 up
    from packaging.version import Version
    assert fam.classify(Version("0.27.0")).id == "D10" and fam.classify(Version("0.28.0")).id == "D9"
    assert any("D10" in p.when for p in fam.probes)
    assert "flashinfer-python" in text and '">=0.6.17"' in text  # [[requires]] ranges are not ours to carve


def test_apply_verify_revert_never_import_the_port_machinery(tmp_path):
    from patcher.maintainer import port_proof, wheels

    tree = wheels.tree("sglang", "0.5.23")
    install = engines.find("sglang", site=tree)
    fam = manifest.load(manifest.PATCHES / "sglang" / "sm120-allreduce-fusion")
    rels = {fp.path for v in fam.variants[-1:] for fp in fam.patches[v.id]}
    site = port_proof.scratch_site(tree, install, rels, tmp_path / "site")
    code = f"""
import sys
from patcher.cli.main import main
for cmd in ("verify", "apply", "verify", "revert"):
    main([cmd, "--engine", "sglang", "--site", {str(site)!r}, "--no-probes", "--only", "sm120-allreduce-fusion"])
bad = sorted(m for m in sys.modules if m == "merge3" or m.startswith("patcher.maintainer"))
assert not bad, bad
print("CLEAN")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert "CLEAN" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.full
@pytest.mark.wheels
@pytest.mark.cpuenv
def test_port_vllm_0_27_0_from_d8_alone_flags_the_new_config_code_and_offers_nothing(tmp_path):
    """D8 (0.25-0.26) opens PassConfig's SM120 size lookup; 0.27.0 added failure paths in the
    config-override code next to it (vllm/config/utils.py). Port proves what it can and leaves
    those lines to a person: exit 1, no diff offered as good (D9 is the reviewed carry)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(["port", "--engine", "vllm", "--to", "0.27.0", "--family", "sm120-allreduce-fusion",
                 "--from", "D8", "--out", str(tmp_path)], out=out, err=err)
    text = out.getvalue()
    assert code == 1, text + err.getvalue()
    assert "proof: strict apply on 0.27.0's published files" in text
    assert "proof: revert gives the bytes RECORD names" in text
    assert "needs a person:" in text and "vllm/config/utils.py" in text
    assert not (tmp_path / "sm120-allreduce-fusion" / "D10.diff").exists()


def _republish(engine: str, base: str, new: str, dest: Path, edit: tuple[str, str, str]) -> Path:
    """``base``'s files published again as ``new`` with one upstream edit (RECORD kept consistent)."""
    from patcher.maintainer import port_proof, wheels

    tree = wheels.tree(engine, base)
    install = engines.find(engine, site=tree)
    rel, old, replacement = edit
    site = port_proof.scratch_site(tree, install, set(), dest)
    for src in (tree / engine).rglob("*.py"):
        target = site / src.relative_to(tree)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(src.read_bytes())
    text = (site / rel).read_text()
    assert text.count(old) == 1
    data = text.replace(old, replacement).encode()
    (site / rel).write_bytes(data)
    info = (site / install.dist_info.name).rename(site / f"{engine}-{new}.dist-info")
    meta = info / "METADATA"
    meta.write_text(meta.read_text().replace(f"Version: {base}", f"Version: {new}", 1))
    record = (info / "RECORD").read_text().splitlines()
    fixed = [f"{rel},{engines.sha256_record(data)},{len(data)}" if ln.startswith(rel + ",") else
             ln.replace(install.dist_info.name, info.name) for ln in record]
    (info / "RECORD").write_text("\n".join(fixed) + "\n")
    return site


@pytest.mark.full
@pytest.mark.wheels
@pytest.mark.cpuenv
def test_port_derives_and_proves_a_release_newer_than_releases_txt(tmp_path):
    from patcher.maintainer import port

    rel = "sglang/srt/layers/layer_boundary/residual/add_norm.py"
    edit = (rel, "def flashinfer_ar_fusion_applies(batch_size: int):",
            "def flashinfer_ar_fusion_applies(batch_size: int) -> bool:")  # two lines above our hunk
    site = _republish("sglang", "0.5.23", "0.5.99", tmp_path / "site", edit)
    req = port.Request("sglang", "0.5.99", ("sm120-allreduce-fusion",), site=site, env_release="0.5.23",
                       out=tmp_path / "out")
    (o,) = port.run(req)
    assert o.state == "proven", "\n".join([o.detail, *o.report, *o.proofs])
    assert o.source == "v11" and o.base == "0.5.23" and o.variant == "v15"  # the next free id (v12-v14 exist)
    assert any(p.startswith("probe ") for p in o.proofs)
    assert " def flashinfer_ar_fusion_applies(batch_size: int) -> bool:" in o.diff  # the new context
    written = (tmp_path / "out" / "sm120-allreduce-fusion" / "patch.toml").read_text()
    assert 'id = "v15"' in written and 'versions = ">=0.5.99"' in written


@pytest.mark.wheels
def test_ports_into_one_out_folder_build_on_each_other(tmp_path):
    """Two releases ported into one --out (what --newer does): the second starts from the first's
    variant and its patch.toml keeps it. Broken by: port.run without the overlay (the second port
    carries v11 again and its patch.toml replaces the first's)."""
    from patcher.maintainer import port

    rel = "sglang/srt/layers/layer_boundary/residual/add_norm.py"
    edit = (rel, "def flashinfer_ar_fusion_applies(batch_size: int):",
            "def flashinfer_ar_fusion_applies(batch_size: int) -> bool:")
    out = tmp_path / "out"
    for version in ("0.5.98", "0.5.99"):
        site = _republish("sglang", "0.5.23", version, tmp_path / version, edit)
        req = port.Request("sglang", version, ("sm120-allreduce-fusion",), site=site, out=out, probes=False)
        (o,) = port.run(req)
        assert o.exit == 0, "\n".join([o.detail, *o.report, *o.proofs])
    assert o.state == "held" and o.variant == "v15", o.detail  # 0.5.99 is v15's pre-image: nothing new
    written = (out / "sm120-allreduce-fusion" / "patch.toml").read_text()
    assert 'id = "v15"' in written and 'versions = ">=0.5.98"' in written and 'id = "v16"' not in written
    # the new variant's scope signature is written beside it (patches/README.md, [scope])
    assert sorted(p.name for p in (out / "sm120-allreduce-fusion").iterdir()) == [
        "derived-scope.json", "patch.toml", "scope.json", "v15.diff"]
    assert "v15" in json.loads((out / "sm120-allreduce-fusion" / "scope.json").read_text())
    assert "v15" in json.loads((out / "sm120-allreduce-fusion" / "derived-scope.json").read_text())
    assert {"0.5.98", "0.5.99"} <= set((out / "releases.txt").read_text().split())


def _port(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(["port", *argv], out=out, err=err), out.getvalue(), err.getvalue()


@pytest.mark.wheels
def test_port_says_what_already_holds_by_content_and_stops(tmp_path):
    import json

    code, out, err = _port("--engine", "sglang", "--to", "0.5.23", "--family", "sm120-allreduce-fusion",
                           "--family", "eagle3-drafter-keys", "--json", "--out", str(tmp_path))
    assert code == 0, out + err
    fams = {f["id"]: f for f in json.loads(out)[0]["families"]}
    assert fams["sglang/eagle3-drafter-keys"]["state"] == "held"
    keys = fams["sglang/eagle3-drafter-keys"]
    assert keys["detail"] == "variant v2 covers it and its pre-image matches byte for byte"
    gate = fams["sglang/sm120-allreduce-fusion"]
    assert gate["state"] == "held" and gate["variant"] == "v11" and gate["proofs"] == []
    shipped = (manifest.PATCHES / "sglang" / "sm120-allreduce-fusion" / "patch.toml").read_text()
    assert (tmp_path / "sm120-allreduce-fusion" / "patch.toml").read_text() == shipped  # v11 already covers it


def test_a_variant_whose_pre_image_matches_a_newer_release_grows_its_range():
    from patcher.maintainer import manifest_edit

    text = (manifest.PATCHES / "vllm" / "sm120-allreduce-fusion" / "patch.toml").read_text()
    grown = manifest_edit.extend_variant(text, "D9", "0.34.0")
    assert 'versions = ">=0.27.0,<=0.34.0"' in grown and grown.count("<=0.34.0") == 1


@pytest.mark.wheels
def test_port_flags_what_it_cannot_carry_with_the_upstream_change(tmp_path):
    code, out, err = _port("--engine", "sglang", "--to", "0.5.8", "--family", "sm120-allreduce-fusion",
                           "--from", "v3", "--no-probes", "--out", str(tmp_path))
    assert code == 1, out + err
    assert "needs a person" in out and "apply_flashinfer_allreduce_fusion" in out  # upstream's new helper
    assert not any(tmp_path.iterdir())  # nothing written for a flagged family


@pytest.mark.parametrize("argv,what", [
    (["--engine", "vllm"], "port needs one release"),
    (["--engine", "vllm", "--to", "0.27.0", "--family", "nope"], "no vllm family 'nope'"),
    (["--engine", "vllm", "--to", "0.27.0", "--from", "D8"], "--from names one variant of one family"),
    (["--engine", "vllm", "--to", "0.27.0", "--family", "sm120-allreduce-fusion", "--from", "X9"],
     "has no variant 'X9'"),
])
def test_port_usage_errors_exit_2_with_one_line(argv, what):
    code, out, err = _port(*argv)
    assert code == 2 and err.splitlines()[0].startswith("error: ") and what in err
    assert "Traceback" not in err


def test_moved_file_gives_the_new_variant_a_probe_of_the_moved_module():
    from patcher.maintainer import manifest_edit
    from patcher.maintainer.manifest_edit import blocks

    text = ('title = "x"\n\n[[variant]]\nid = "v1"\nversions = ">=1.0"\n\n[[probe]]\nid = "p"\nmodule = "a.b"\n'
            'check = "c"\nwhen = [\n  "v1",\n  "upstream",\n]\n')
    same = manifest_edit.add_variant(text, "v1", "v2", "1.5", ["1.0", "1.5"])
    assert [b.field("when") for b in blocks(same) if b.kind == "probe"] == [["v1", "v2", "upstream"]]
    moved = manifest_edit.add_variant(text, "v1", "v2", "1.5", ["1.0", "1.5"], {"a.b": "a.c"})
    probes = [(b.field("module"), b.field("when")) for b in blocks(moved) if b.kind == "probe"]
    assert probes == [("a.b", ["v1", "upstream"]), ("a.c", ["v2"])]
    assert [b.field("versions") for b in blocks(moved) if b.kind == "variant"] == [">=1.0,<1.5", ">=1.5"]


def _family_patches(engine: str, name: str, variant: str):
    (fam,) = [f for f in manifest.load_all(manifest.PATCHES, (engine,)) if f.name == name]
    return fam.patches[variant]


@pytest.mark.wheels
def test_new_auto_enable_of_the_switch_our_gate_reads_is_flagged():
    from patcher.maintainer import new_upstream_code, wheels

    v3 = _family_patches("sglang", "sm120-allreduce-fusion", "v3")
    found = new_upstream_code.switch_setters(v3, wheels.tree("sglang", "0.5.4.post1"),
                                             wheels.tree("sglang", "0.5.4.post2"), "sglang")
    assert found and all("enable_flashinfer_allreduce_fusion" in f for f in found)
    assert any(f.startswith("sglang/srt/server_args.py:") and "is_blackwell_supported()" in f for f in found), found
    # Between two releases whose auto-enables are the same, nothing is said.
    v2 = _family_patches("sglang", "sm120-allreduce-fusion", "v2")
    assert new_upstream_code.switch_setters(v2, wheels.tree("sglang", "0.5.3"), wheels.tree("sglang", "0.5.3.post1"),
                                  "sglang") == []


@pytest.mark.wheels
def test_new_sibling_module_with_a_function_we_edit_is_flagged():
    from patcher.maintainer import new_upstream_code, wheels

    v1 = _family_patches("sglang", "eagle3-drafter-keys", "v1")
    found = new_upstream_code.sibling_modules(v1, wheels.tree("sglang", "0.5.11"), wheels.tree("sglang", "0.5.12"))
    assert found == ["sglang/srt/models/kimi_k25_eagle3.py: a new upstream module beside "
                     "sglang/srt/models/llama_eagle3.py defines load_weights(), which this variant edits there; "
                     "it may need the same change"]
    assert new_upstream_code.sibling_modules(v1, wheels.tree("sglang", "0.5.10"), wheels.tree("sglang", "0.5.11")) == []


@pytest.mark.wheels
def test_a_release_a_family_is_flagged_on_is_never_listed(tmp_path):
    """Issue 55's path around the scope check: with the patch set cut before vLLM 0.34.0 (the honest
    cut: D9's scope signatures are those of the releases before it), sm120-allreduce-fusion is
    flagged there (its scope moved); listing 0.34.0 in releases.txt beside another family's result
    would declare D9 (open range, >=0.27.0) as tested there, and 'apply' would write it without the
    scope check. Broken by: write() adding the release whatever a family's state."""
    from patcher.core import scope
    from patcher.core.release_files import Files
    from patcher.maintainer import leave_out, port, wheels

    tree = wheels.tree("vllm", "0.34.0")
    files = Files(engines.find("vllm", site=tree))
    root = leave_out.cut(manifest.PATCHES, "vllm", "0.34.0", tmp_path / "patches")
    families = {f.name: f for f in manifest.load_all(root, ("vllm",))}
    gate = families["sm120-allreduce-fusion"]
    assert gate.scope is not None
    own = {rel: list(reads) for rel, reads in scope.signature(gate.scope, files).items()}
    lock = root / "vllm" / "sm120-allreduce-fusion" / "scope.json"
    locked = json.loads(lock.read_text())
    assert own not in locked["D9"]
    keys = families["eagle3-config-aux-ids"]
    held = port.Outcome(keys.id, "held", "a family a person finished", variant="E8",
                        manifest=(keys.folder / "patch.toml").read_text())
    out = tmp_path / "out"
    port.write(port.Request("vllm", "0.34.0", root=root, site=tree, out=out), [held], files)
    assert (out / "eagle3-config-aux-ids" / "patch.toml").is_file()  # the finished family is written...
    assert not (out / "releases.txt").is_file()  # ...and the release is not listed
    assert any("vllm/sm120-allreduce-fusion's variant D9 has a range that holds it" in r for r in held.report), \
        held.report
    # With 0.34.0's own signature proven for D9 (the patch set as shipped), nothing blocks the listing.
    lock.write_text(json.dumps({**locked, "D9": [*locked["D9"], own]}))
    held.report.clear()
    port.write(port.Request("vllm", "0.34.0", root=root, site=tree, out=out), [held], files)
    assert "0.34.0" in (out / "releases.txt").read_text().split(), held.report
