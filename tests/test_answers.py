"""The release's files as every cached answer's key sees them (patcher/release/answers.py): by
content, so a revert that writes the same bytes back finds the answers asked before, and any change
of a byte, a file or its name asks again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patcher.release import answers


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(answers, "ROOT", tmp_path / "cache")
    (tmp_path / "site" / "engine" / "sub").mkdir(parents=True)
    (tmp_path / "site" / "engine" / "a.py").write_text("A = 1\n")
    (tmp_path / "site" / "engine" / "sub" / "b.py").write_text("B = 2\n")
    (tmp_path / "site" / "engine" / "data.txt").write_text("not code\n")
    return tmp_path / "site"


def _digest(site: Path) -> str:
    return answers.files_digest(site, None, "engine")


def test_the_same_bytes_written_again_are_the_same_release(site: Path) -> None:
    before = _digest(site)
    a = site / "engine" / "a.py"
    a.write_text("A = 3\n")  # same size, new bytes: apply
    patched = _digest(site)
    assert patched != before
    a.write_text("A = 1\n")  # revert: the old bytes, a new mtime
    os.utime(a, ns=(1, 1))
    assert _digest(site) == before
    assert _digest(site) == before  # read back from the memo of that listing


@pytest.mark.parametrize("change", ["edit", "rename", "remove", "add"])
def test_every_change_of_the_code_is_a_new_key(site: Path, change: str) -> None:
    before = _digest(site)
    b = site / "engine" / "sub" / "b.py"
    if change == "edit":
        b.write_text("B = 22\n")
    elif change == "rename":
        b.rename(b.with_name("c.py"))
    elif change == "remove":
        b.unlink()
    else:
        (site / "engine" / "d.py").write_text("")
    assert _digest(site) != before


def test_a_file_that_is_not_code_is_not_in_the_key(site: Path) -> None:
    before = _digest(site)
    (site / "engine" / "data.txt").write_text("changed\n")
    assert _digest(site) == before


def test_a_damaged_memo_is_recomputed_not_believed(site: Path) -> None:
    before = _digest(site)
    memos = list((answers.ROOT / "digests").glob("*.json"))
    assert len(memos) == 1
    for bad in ('{"content": "../../etc"}', "[1, 2]", "{", '{"content": 7}'):
        memos[0].write_text(bad)
        assert _digest(site) == before, bad


def test_every_input_of_a_loader_answer_is_in_its_key(tmp_path: Path) -> None:
    """A loader answer is found again only for the same question: the interpreter, the release's
    files and our child's code, the request (drafter, target, launch, header), and the drafter's
    and target's folders (their config.json, a target's configuration code) each change the key
    (patcher/release/release_loader.py)."""
    from patcher.release import release_loader

    drafter, target = tmp_path / "drafter", tmp_path / "target"
    for folder in (drafter, target):
        folder.mkdir()
        (folder / "config.json").write_text("{}")
    ask = release_loader.Ask(drafter, {"fc.weight": ("BF16", (4, 12))}, ["--speculative-config", "{}"], target)
    args = ["interpreter digest", "digest+child code"]

    def key(a=args, q=ask) -> str:
        return release_loader._key(a[0], a[1], q.request(), q)

    base = key()
    assert key() == base
    changed = {key([*args[:i], f"{v}x", *args[i + 1:]]) for i, v in enumerate(args)}
    changed |= {key(q=release_loader.Ask(tmp_path, ask.header, ask.argv, target)),
                key(q=release_loader.Ask(drafter, {"fc.weight": ("BF16", (4, 13))}, ask.argv, target)),
                key(q=release_loader.Ask(drafter, ask.header, ["--speculative-config", "{ }"], target)),
                key(q=release_loader.Ask(drafter, ask.header, ask.argv, None))}
    for folder in (drafter, target):
        (folder / "config.json").write_text('{"x": 1}')
        changed.add(key())
        (folder / "config.json").write_text("{}")
    (target / "configuration_deepseek.py").write_text("class DeepseekV3Config: ...\n")
    changed.add(key())
    assert base not in changed and len(changed) == 9


def _site(root: Path) -> Path:
    """A site folder as a CPU env has it: distributions, a .pth file, the shims' sitecustomize."""
    site = root / "lib" / "site-packages"
    (site / "torch-2.13.0+cpu.dist-info").mkdir(parents=True)
    (site / "transformers-4.57.1.dist-info").mkdir()
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    (site / "distutils-precedence.pth").write_text("import os\n")
    (site / "checkout.pth").write_text("/work/main\n")
    (site / "sitecustomize.py").write_text("SHIMS = frozenset({'numba'})\n")
    return site


def test_the_interpreter_is_keyed_by_what_it_is_not_where_it_lives(tmp_path: Path) -> None:
    """Two copies of one environment (each test worker builds its own) are one interpreter to every
    cached answer; a distribution upgraded, added or removed, a shim or a .pth file edited, or
    another Python version, is another one (patcher/release/answers.py)."""
    import shutil
    import sys

    one, other = _site(tmp_path / "envs"), _site(tmp_path / "envs-gw1")
    base = answers.interpreter_digest(sys.executable, one)
    assert answers.interpreter_digest(sys.executable, other) == base
    assert answers.interpreter_digest(sys.executable, one) == base

    def changes(edit) -> bool:
        scratch = tmp_path / "scratch"
        shutil.rmtree(scratch, ignore_errors=True)
        site = _site(scratch)
        edit(site)
        return answers.interpreter_digest(sys.executable, site) != base

    assert changes(lambda s: (s / "torch-2.13.0+cpu.dist-info").rename(s / "torch-2.14.0+cpu.dist-info"))
    assert changes(lambda s: (s / "transformers-4.57.1.dist-info").rmdir())
    assert changes(lambda s: (s / "numba-0.61.0.dist-info").mkdir())
    assert changes(lambda s: (s / "sitecustomize.py").write_text("SHIMS = frozenset()\n"))
    assert changes(lambda s: (s / "distutils-precedence.pth").write_text("import sys\n"))
    assert not changes(lambda s: (s / "torch" / "__init__.py").write_text("# a package's own code: keyed apart\n"))
    assert not changes(lambda s: (s / "checkout.pth").write_text(f"{tmp_path}/another-clone\n"))  # a path it adds
    pythons = sorted(Path(sys.base_prefix).parent.glob("3.1[0-3]*/bin/python"))
    others = [p for p in pythons if not str(p).startswith(sys.base_prefix)]
    if not others:
        pytest.skip("no other Python version on this machine")
    assert answers.interpreter_digest(str(others[0]), one) != base


def test_an_answer_unused_for_a_month_is_pruned_and_one_read_is_kept(tmp_path: Path) -> None:
    """Every change of a child's code or a release's files keys new answers; the old ones go once
    neither written nor read for ``UNUSED_DAYS``, checked at most once a day per folder."""
    folder = tmp_path / "launch"
    month = answers.UNUSED_DAYS * 86400
    old, read, fresh = (folder / f"{name}.json" for name in ("old", "read", "fresh"))
    for path in (old, read):
        answers.store(path, {"status": "parsed"})
        os.utime(path, (1, 1))  # written long ago
    (folder / ".pruned").unlink()  # the first store pruned (nothing was old then)
    assert answers.load(read) == {"status": "parsed"}  # ... and read now
    answers.store(fresh, {"status": "parsed"})
    assert not old.exists() and read.exists() and fresh.exists()
    os.utime(read, (1, 1))
    answers.store(fresh, {"status": "parsed"})  # pruned less than a day ago: not again
    assert read.exists()
    answers.prune(folder, now=(folder / ".pruned").stat().st_mtime + 86401 + month)
    assert not read.exists() and not fresh.exists()
