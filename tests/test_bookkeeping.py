"""Our own bookkeeping (``<site>/.kimi-patcher/``: lock, journal, backups, state) is untrusted input.

On a real published SGLang release (0.5.9: its dist-info, RECORD and every file our SGLang
families read, copied into a temporary site tree), a forged journal must not make recovery
write outside site-packages, and arbitrary bytes or JSON in any of our files must give a
one-line error or a documented recovery, never a traceback, never a write outside RECORD.
The figures of the hostile-input campaign are printed at the end of the module.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from patcher import manifest, write
from patcher.__main__ import main
from patcher.engines import sha256_record

pytestmark = pytest.mark.wheels

ENGINE, VERSION = "sglang", "0.5.9"
TARGET = "sglang/srt/models/llama_eagle3.py"  # patched on 0.5.9 by eagle3-drafter-keys
FIGURES = {"hostile inputs": 0, "tracebacks": 0, "writes outside RECORD": 0, "left unrevertable": 0}


def _files_we_read() -> set[str]:
    out = set()
    for fam in manifest.load_all(manifest.PATCHES, (ENGINE,)):
        for v in fam.variants:
            out |= {fp.path for fp in fam.patches[v.id]}
        for entry in (*fam.upstream, *fam.refused):
            out |= {ev.file for ev in entry.evidence}
    return out


def _release_site(tmp_path_factory, version: str) -> Path:
    from patcher.maintainer import wheels

    src = wheels.tree(ENGINE, version)
    dest = tmp_path_factory.mktemp("release") / "site"
    for info in src.glob(f"{ENGINE}-*.dist-info"):
        shutil.copytree(info, dest / info.name)
    for rel in _files_we_read():
        if (src / rel).exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)
    return dest


@pytest.fixture(scope="module")
def release_site(tmp_path_factory) -> Path:
    return _release_site(tmp_path_factory, VERSION)


@pytest.fixture(scope="module", params=[VERSION, "0.5.10.post1"])  # the two releases the hostile-input review tried
def attacked_site(request, tmp_path_factory) -> Path:
    return _release_site(tmp_path_factory, request.param)


@pytest.fixture
def box(release_site, tmp_path) -> Path:
    """tmp_path holding ``site`` (a copy of the release) and ``outside`` (a sentinel folder)."""
    shutil.copytree(release_site, tmp_path / "site")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "sentinel").write_bytes(b"untouched\n")
    return tmp_path


def snapshot(root: Path, skip_ours: bool = False) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if skip_ours and write.DIRNAME in p.parts:
            continue
        key = str(p.relative_to(root))
        if p.is_symlink():
            out[key] = "->" + os.readlink(p)
        elif p.is_file():
            out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[key] = "dir"
    return out


def cli(*argv: str) -> tuple[int, str, str]:
    """The CLI in-process; an exception escaping main() is what a user would see as a traceback."""
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(list(argv), out=out, err=err)
    except BaseException as exc:  # noqa: BLE001 - counting tracebacks is the point
        return -1, out.getvalue(), f"Traceback: {type(exc).__name__}: {exc}"
    return code, out.getvalue(), err.getvalue()


def run(action: str, site: Path, *extra: str) -> tuple[int, str, str]:
    return cli(action, "--engine", ENGINE, "--site", str(site), "--no-probes", *extra)


def assert_clean_error(code: int, err: str) -> None:
    assert code == 2, (code, err)
    lines = err.splitlines()
    assert lines[0].startswith("error: ") and "Traceback" not in err, err
    assert any(ln.strip().startswith(("wanted:", "found:")) for ln in lines[1:]), err
    assert any(ln.strip().startswith("hint:") for ln in lines[1:]), err


def plant_journal(site: Path, entries: list[dict], payload: bytes = b"planted\n") -> Path:
    txn = site / write.DIRNAME / f"{ENGINE}.txn"
    txn.mkdir(parents=True)
    (txn / "0.orig").write_bytes(payload)
    full = [dict({"old": sha256_record(payload), "new": sha256_record(b""), "backup": "0.orig", "mode": 0o644}, **e)
            for e in entries]
    (txn / "journal.json").write_text(json.dumps({"engine": ENGINE, "state_before": False, "files": full}))
    return txn


# --------------------------------------------------------------------------------------------
# 1. A forged journal: recovery writes only RECORD files inside site-packages, never through symlinks.

def _attack(box: Path, kind: str) -> tuple[list[dict], Path]:
    site, outside = box / "site", box / "outside"
    if kind == "dotdot":
        return [{"rel": os.path.relpath(outside / "x", site)}], outside / "x"
    if kind == "absolute":
        return [{"rel": str(outside / "x")}], outside / "x"
    if kind == "inner-dotdot":
        return [{"rel": "sglang/../../outside/x"}], outside / "x"
    if kind == "not-in-record":
        return [{"rel": "sglang/srt/models/new_module.py"}], site / "sglang/srt/models/new_module.py"
    if kind == "symlinked-dir":  # a RECORD file reached through a folder that now points outside
        models = site / "sglang/srt/models"
        shutil.move(str(models), outside / "models")
        models.symlink_to(outside / "models")
        (outside / "models" / "llama_eagle3.py").unlink()
        return [{"rel": TARGET}], outside / "models" / "llama_eagle3.py"
    if kind == "symlinked-file":
        (site / TARGET).unlink()
        (site / TARGET).symlink_to(outside / "y")
        return [{"rel": TARGET}], outside / "y"
    if kind == "backup-outside":  # a backup name that climbs out: an outside file moved into the engine
        (outside / "payload").write_bytes(b"planted\n")
        (site / TARGET).write_bytes(b"# edited\n")
        return [{"rel": TARGET, "backup": "../../../outside/payload"}], site / TARGET
    raise AssertionError(kind)


ATTACKS = ["dotdot", "absolute", "inner-dotdot", "not-in-record", "symlinked-dir", "symlinked-file", "backup-outside"]


@pytest.mark.parametrize("action", ["apply", "revert"])
@pytest.mark.parametrize("kind", ATTACKS)
def test_forged_journal_is_refused_and_changes_nothing(attacked_site, tmp_path, kind, action):
    box = tmp_path
    shutil.copytree(attacked_site, box / "site")
    (box / "outside").mkdir()
    (box / "outside" / "sentinel").write_bytes(b"untouched\n")
    entries, victim = _attack(box, kind)
    plant_journal(box / "site", entries)
    existed = victim.exists() or victim.is_symlink()
    before = snapshot(box)
    code, _, err = run(action, box / "site")
    FIGURES["hostile inputs"] += 1
    assert_clean_error(code, err)
    if not existed:
        assert not victim.exists(), f"{victim} was written"
    after = {k: v for k, v in snapshot(box).items() if not k.endswith(".lock")}
    assert after == {k: v for k, v in before.items() if not k.endswith(".lock")}, "something changed"


def test_symlinked_bookkeeping_folder_is_refused(box):
    site, outside = box / "site", box / "outside"
    (site / write.DIRNAME).symlink_to(outside, target_is_directory=True)
    (outside / f"{ENGINE}.json").write_text(json.dumps({"engine": ENGINE, "version": VERSION, "families": {}}))
    before = snapshot(box)
    for action in ("apply", "verify", "revert"):
        code, _, err = run(action, site)
        FIGURES["hostile inputs"] += 1
        assert_clean_error(code, err)
    assert snapshot(box) == before


def test_planted_symlink_at_a_temporary_name_is_not_followed(box):
    """A symlink where apply writes its temporary must be replaced, not written through."""
    site, outside = box / "site", box / "outside"
    tmp = write._tmp_for(site / TARGET)
    tmp.symlink_to(outside / "sentinel")
    code, _, err = run("apply", site)
    FIGURES["hostile inputs"] += 1
    assert code in (0, 1) and "Traceback" not in err, err
    assert (outside / "sentinel").read_bytes() == b"untouched\n"
    assert run("revert", site)[0] == 0


# --------------------------------------------------------------------------------------------
# 2. Arbitrary JSON and bytes in each of our files: clear errors or recovery, never a traceback.

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.support.tiers import examples  # noqa: E402

FAMILY = "sglang/eagle3-drafter-keys"
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
                    max_leaves=12)


@pytest.fixture(scope="module")
def starts(release_site, tmp_path_factory) -> dict[str, Path]:
    """The release pristine, and with our patches applied (state file written)."""
    root = tmp_path_factory.mktemp("starts")
    pristine, applied = root / "pristine", root / "applied"
    shutil.copytree(release_site, pristine)
    shutil.copytree(release_site, applied)
    assert run("apply", applied)[0] == 0
    return {"pristine": pristine, "applied": applied}


def _valid(kind: str, applied: Path) -> object:
    """The document patcher itself writes for ``kind``, to mutate one field of."""
    if kind in ("state", "state.orig"):
        return json.loads((applied / write.DIRNAME / f"{ENGINE}.json").read_text())
    patched = (applied / TARGET).read_bytes()
    return {"engine": ENGINE, "state_before": False, "files": [
        {"rel": TARGET, "old": sha256_record(patched), "new": sha256_record(b"x"), "backup": "0.orig", "mode": 420}]}


def _mutate(doc: object, path: list[int], value: object) -> object:
    """``doc`` with the node chosen by ``path`` (indices into each level's keys) replaced by ``value``."""
    if not path or not isinstance(doc, (dict, list)) or not doc:
        return value
    keys = list(doc.keys()) if isinstance(doc, dict) else list(range(len(doc)))
    key = keys[path[0] % len(keys)]
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[key] = _mutate(doc[key], path[1:], value)  # type: ignore[index]
    return copy


HOSTILE = st.one_of(
    st.binary(max_size=200).map(lambda b: ("bytes", b, [])),
    JSON.map(lambda v: ("json", v, [])),
    st.tuples(st.lists(st.integers(0, 7), min_size=1, max_size=5), JSON).map(lambda t: ("mutant", t[1], t[0])),
)
FILES = ["state", "journal", "backup", "state.orig", "lock"]


def _plant(site: Path, applied: Path, which: str, how: tuple) -> None:
    kind, value, path = how
    home = site / write.DIRNAME
    txn = home / f"{ENGINE}.txn"
    if which in ("backup", "state.orig") or (which == "journal" and kind == "mutant"):
        txn.mkdir(parents=True, exist_ok=True)  # a run killed after its renames: the journal and its backup
        (txn / "journal.json").write_text(json.dumps(_valid("journal", applied)))
        (txn / "0.orig").write_bytes((applied / TARGET).read_bytes())
    if kind == "bytes":
        data = value
    else:
        data = json.dumps(_mutate(_valid(which, applied), path, value) if kind == "mutant" else value).encode()
    dest = {"state": home / f"{ENGINE}.json", "journal": txn / "journal.json", "backup": txn / "0.orig",
            "state.orig": txn / "state.orig", "lock": home / f"{ENGINE}.lock"}[which]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


def _record(site: Path) -> dict[str, str]:
    (info,) = site.glob(f"{ENGINE}-*.dist-info")
    from patcher.engines import _record as parse

    return parse(info)


@pytest.mark.parametrize("which", FILES)
def test_hostile_bookkeeping_never_tracebacks_nor_writes_outside_record(starts, tmp_path_factory, which):
    record = _record(starts["pristine"])

    @settings(max_examples=examples(40), deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(start=st.sampled_from(["pristine", "applied"]), how=HOSTILE)
    def one(start, how):
        box = tmp_path_factory.mktemp("h")
        site, outside = box / "site", box / "outside"
        shutil.copytree(starts[start], site)
        outside.mkdir()
        (outside / "sentinel").write_bytes(b"untouched\n")
        _plant(site, starts["applied"], which, how)
        before = snapshot(box, skip_ours=True)
        FIGURES["hostile inputs"] += 1
        errors = []
        for action in ("verify", "apply", "verify", "revert"):
            code, _, err = run(action, site)
            if code not in (0, 1, 2) or "Traceback" in err:
                FIGURES["tracebacks"] += 1
                pytest.fail(f"{which} {how!r}: {action} -> {code}: {err}")
            if code == 2:
                assert_clean_error(code, err)
                errors.append(err)
        after = snapshot(box, skip_ours=True)
        stray = sorted(k for k in before.keys() | after.keys()
                       if before.get(k) != after.get(k) and k.removeprefix("site/") not in record)
        if stray:
            FIGURES["writes outside RECORD"] += 1
            pytest.fail(f"{which} {how!r}: written outside RECORD: {stray}")
        if errors:  # every error here names our file or folder and says to delete it
            assert all(write.DIRNAME in e and "delete" in e for e in errors), errors
            shutil.rmtree(site / write.DIRNAME)
        code, _, err = run("revert", site)
        if code != 0 or any(sha256_record((site / rel).read_bytes()) != record[rel]
                            for rel in _files_we_read() if (site / rel).exists()):
            FIGURES["left unrevertable"] += 1
            pytest.fail(f"{which} {how!r}: revert after the campaign: {code} {err}")
        shutil.rmtree(box)

    one()


MALFORMED_CASES = [("state", b"[]"), ("state", b'{"families": []}'), ("journal", b"garbage"),
               ("journal", b'{"files": 3}'), ("journal", b"[1, 2]")]


@pytest.mark.parametrize("which,data", MALFORMED_CASES, ids=[f"{w}-{d.decode()}" for w, d in MALFORMED_CASES])
def test_malformed_state_and_journal_shapes_give_one_line_errors(starts, tmp_path, which, data):
    site = tmp_path / "site"
    shutil.copytree(starts["applied"], site)
    _plant(site, starts["applied"], which, ("bytes", data, []))
    FIGURES["hostile inputs"] += 1
    for action in ("verify", "apply", "revert") if which == "state" else ("apply", "revert"):
        code, _, err = run(action, site)
        assert_clean_error(code, err)
        assert "delete" in err and write.DIRNAME in err, err


@pytest.fixture(scope="module", autouse=True)
def _figures():
    yield
    print("\nbookkeeping campaign: " + ", ".join(f"{k}: {v}" for k, v in FIGURES.items()))
