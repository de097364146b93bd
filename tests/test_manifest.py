"""Manifest validation: a bad patch.toml is rejected with the field quoted."""

from __future__ import annotations

from pathlib import Path

import pytest

from patcher import engine_specs
from patcher.core import manifest
from patcher.errors import ManifestError

GOOD = """title = "t"
why = "w"
[[variant]]
id = "v1"
versions = ">=1.0,<2.0"
"""
FACT = ('[[drafter_fact]]\nkey = "k"\npath = "config"\ndrafter = "D"\nversions = ">=1.0"\n'
        'published = "dropped"\npatched = "refused"\n')
DIFF = "--- a/eng/m.py\n+++ b/eng/m.py\n@@ -1 +1 @@\n-a\n+b\n"


def family(tmp_path: Path, toml: str, diff: str = DIFF, name: str = "v1.diff") -> Path:
    folder = tmp_path / "eng" / "fam"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "patch.toml").write_text(toml)
    (folder / name).write_text(diff)
    return folder


def test_good_manifest_loads(tmp_path):
    f = manifest.load(family(tmp_path, GOOD))
    assert f.id == "eng/fam" and f.default and [fp.path for fp in f.patches["v1"]] == ["eng/m.py"]


@pytest.mark.parametrize("toml,message", [
    (GOOD.replace('title = "t"\n', ""), "eng/fam/patch.toml: missing field 'title'"),
    (GOOD.replace('">=1.0,<2.0"', '">=1.0,<"'),
     "eng/fam/patch.toml variant[0]: invalid specifier 'versions' = '>=1.0,<'"),
    (GOOD.replace('id = "v1"', "id = 1"), "eng/fam/patch.toml variant[0]: field 'id' = 1"),
    ("colour = 1\n" + GOOD, "eng/fam/patch.toml: unknown field 'colour'"),
    (GOOD + "colour = 1\n", "eng/fam/patch.toml variant[0]: unknown field 'colour'"),
    (GOOD + '[[variant]]\nid = "v2"\nversions = ">=1.5"\ndiffs = ["v1.diff"]\n',
     "eng/fam/patch.toml: version ranges overlap at 1.5"),
    (GOOD + '[[upstream]]\nversions = ">=2.0"\nsince = "2.0"\nref = "x#1"\nevidence = [{ file = "eng/m.py" }]\n',
     "eng/fam/patch.toml upstream[0].evidence[0]: neither 'contains' nor 'lacks'"),
    (GOOD + '[[requires]]\ndistribution = "fi"\nversions = ">=1"\nseverity = "maybe"\nwhy = "w"\n',
     "eng/fam/patch.toml requires[0]: field 'severity' = 'maybe'"),
    (GOOD + '[[probe]]\nid = "p"\nmodule = "m"\ncheck = "c"\nwhen = ["v9"]\n',
     "eng/fam/patch.toml probe[0]: field 'when' names 'v9'"),
    ("title = [", "eng/fam/patch.toml: "),
    (GOOD + FACT.replace('"dropped"', '"lost"'), "eng/fam/patch.toml drafter_fact[0]: field 'published' = 'lost'"),
    (GOOD + FACT.replace('"dropped"', '"refused"'),
     "eng/fam/patch.toml drafter_fact[0]: field 'published' = 'refused'"),
    (GOOD + FACT.replace('"config"', '"hub"'), "eng/fam/patch.toml drafter_fact[0]: field 'path' = 'hub'"),
])
def test_bad_manifest_quotes_the_field(tmp_path, toml, message):
    with pytest.raises(ManifestError) as exc:
        manifest.load(family(tmp_path, toml))
    assert exc.value.what.startswith(message)


def test_drafter_facts_load_in_order(tmp_path):
    (fact,) = manifest.load(family(tmp_path, GOOD + FACT)).drafter_facts
    assert (fact.key, fact.path, fact.drafter, str(fact.versions), fact.published, fact.patched) == (
        "k", "config", "D", ">=1.0", "dropped", "refused")


def test_diff_outside_the_engine_is_rejected(tmp_path):
    with pytest.raises(ManifestError) as exc:
        manifest.load(family(tmp_path, GOOD, DIFF.replace("eng/m.py", "other/m.py"))).check_diffs()
    assert exc.value.what == "eng/fam/v1.diff: target 'other/m.py' is outside the engine"


def test_every_shipped_manifest_loads_and_has_probes():
    fams = manifest.load_all()
    assert {f.engine for f in fams} == set(engine_specs.NAMES)
    for f in fams:
        f.check_diffs()  # every variant's diffs parse (runs parse only what they use)
        assert f.probes, f"{f.id} has no probe"
        assert (f.folder / "probes.py").is_file()
        import ast
        tree = ast.parse((f.folder / "probes.py").read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        for p in f.probes:
            assert p.check in names, f"{f.id}: probe {p.id} names missing function {p.check}"


def test_shipped_diffs_have_no_carriage_returns():
    """Integrity: a diff converted by a Windows checkout must never ship (parse rejects it too)."""
    for diff in manifest.PATCHES.rglob("*.diff"):
        assert b"\r" not in diff.read_bytes(), diff


@pytest.mark.wheels
def test_a_run_parses_each_family_of_its_engine_once_and_no_other_engine_s(monkeypatch, tmp_path):
    """Issue 59, work once: verify --engine vllm asked for vLLM's families from the selection, the plan
    and the report (37 loads, 15 families of both engines, before); each is parsed once per run now,
    and another engine's families only where a name must be explained. No test-side cache stands in."""
    import io

    from patcher.cli.main import main
    from patcher.maintainer import wheels

    parsed: list[str] = []
    real = manifest._parse
    monkeypatch.setattr(manifest, "_parse", lambda folder: parsed.append(Path(folder).parent.name + "/" +
                                                                         Path(folder).name) or real(folder))
    monkeypatch.setattr(manifest, "_LOADED", {})
    site = str(wheels.tree("vllm", "0.34.0"))
    main(["verify", "--engine", "vllm", "--site", site, "--no-probes"], out=io.StringIO(), err=io.StringIO())
    mine = sorted(f"vllm/{p.name}" for p in (manifest.PATCHES / "vllm").iterdir() if (p / "patch.toml").is_file())
    assert sorted(parsed) == mine
    parsed.clear()
    main(["verify", "--engine", "vllm", "--site", site, "--no-probes", "--skip", "mla-aux-capture"],
         out=io.StringIO(), err=io.StringIO())
    assert parsed == []  # the same bytes: the families already parsed
    code = main(["verify", "--engine", "vllm", "--site", site, "--no-probes", "--skip", "eagle3-loud-fc-skip"],
                out=io.StringIO(), err=io.StringIO())
    whose = {p.split("/")[0] for p in parsed}  # to say whose it is: other engines' only
    assert code == 2 and "sglang" in whose and "vllm" not in whose, parsed
    # a family whose bytes changed is parsed again: any file of it, or the engine's releases.txt
    import shutil

    folder = tmp_path / "vllm" / "mla-aux-capture"
    shutil.copytree(manifest.PATCHES / "vllm" / "mla-aux-capture", folder)
    shutil.copyfile(manifest.PATCHES / "vllm" / "releases.txt", tmp_path / "vllm" / "releases.txt")
    parsed.clear()
    first = manifest.load(folder)
    assert manifest.load(folder) is first and parsed == ["vllm/mla-aux-capture"]
    for edited in (folder / "patch.toml", next(folder.glob("*.diff")), tmp_path / "vllm" / "releases.txt"):
        edited.write_text(edited.read_text() + "\n")
        assert manifest.load(folder) is not first and len(parsed) == 2, edited.name
        parsed.pop()
        first = manifest.load(folder)
