"""``patcher port``'s proof: a candidate variant, proven the way the release harness proves a shipped one.

On the published files of the release (a scratch copy of its dist-info and the target
files): strict apply through patcher's own apply (patcher.core.hunks, no fuzz), every patched
file compiles, a second apply changes nothing, revert gives the bytes RECORD names. Then the
family's probes, run by patcher's probe runner in the CPU import environment of that
engine line (patcher/maintainer/cpu_env.py), on a scratch copy of the patch set: the
shipped set is never touched. Each step returns what it saw; the first failure stops.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from patcher.core.plan import State
from patcher.environment import engines
from patcher.errors import PatcherError
from patcher.installer import actions
from patcher.maintainer import cpu_env
from patcher.probes import probes


def scratch_site(tree: Path, install: engines.Install, rels: set[str], dest: Path) -> Path:
    """A copy of the install holding its dist-info and the files our diffs touch."""
    shutil.copytree(install.dist_info, dest / install.dist_info.name)
    for rel in rels:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / rel, dest / rel)
    return dest


def on_files(engine: str, family_id: str, patches: Path, tree: Path, rels: set[str]) -> list[str]:
    """Strict apply, compile, re-apply no-op, revert to RECORD; raises AssertionError on a failure."""
    install = engines.find(engine, site=tree)
    seen = []
    with tempfile.TemporaryDirectory(prefix="kimi-port-") as tmp:
        site = scratch_site(tree, install, rels, Path(tmp) / "site")
        opts = actions.Options(site=site, probes=False, only=(family_id,), patches=patches)
        r = actions.apply(engine, opts)
        states = {s.family.id: (s.state, s.detail) for s in r.statuses}
        assert states[family_id][0] is State.APPLIED, f"strict apply: {states[family_id][1]}"
        assert sorted(r.changed) == sorted(rels), f"strict apply changed {r.changed}, wanted {sorted(rels)}"
        seen.append(f"strict apply on {install.version}'s published files: {len(rels)} file(s)")
        for rel in rels:
            try:
                compile((site / rel).read_text(), rel, "exec")
            except SyntaxError as exc:
                raise AssertionError(f"compile: {rel}:{exc.lineno}: {exc.msg}") from None
        seen.append("every patched file compiles")
        assert actions.apply(engine, opts).changed == [], "a second apply changed files"
        seen.append("re-apply is a no-op")
        r = actions.revert(engine, opts)
        assert sorted(r.changed) == sorted(rels), f"revert changed {r.changed}"
        for rel in rels:
            assert install.pristine(rel, (site / rel).read_bytes()), f"revert: {rel} differs from RECORD"
        seen.append("revert gives the bytes RECORD names")
    return seen


def _check_probes(family_id: str, statuses: list) -> list[str]:
    (st,) = [s for s in statuses if s.family.id == family_id]
    assert st.state is State.APPLIED, f"probe env: {st.state.value}: {st.detail}"
    assert st.probes, "no probe of this family runs for the new variant"
    bad = [f"{p['id']}: {p['status']}: {p['detail']}" for p in st.probes if p["status"] != "passed"]
    assert not bad, "probe " + "; ".join(bad)
    return [f"probe {p['id']} passed" for p in st.probes]


def in_cpu_env(engine: str, version: str, family_id: str, patches: Path, shipped: Path,
               tree: Path, env_release: str | None = None) -> list[str]:
    """The family's probes on the patched release, imported for real. ``env_release``: the
    published release whose env hosts ``version``'s files (a release not on the index)."""
    quiet = lambda *a, **k: None  # noqa: E731 - the env builder's progress is not our report
    with cpu_env.using(engine, env_release or version, log=quiet) as python:
        if env_release is None:
            return _installed(engine, family_id, patches, shipped, str(python))
        with _overlay(engine, python, tree) as site:
            return _overlaid(engine, family_id, patches, site, python)


def _installed(engine: str, family_id: str, patches: Path, shipped: Path, python: str) -> list[str]:
    # Leftovers of an interrupted run (of anyone's shipped set) go first.
    actions.revert(engine, actions.Options(python=python, probes=False, patches=shipped))
    opts = actions.Options(python=python, only=(family_id,), patches=patches)
    try:
        r = actions.apply(engine, opts)
        return _check_probes(family_id, r.statuses)
    finally:
        actions.revert(engine, opts)


@contextlib.contextmanager
def _overlay(engine: str, python: Path, tree: Path) -> Iterator[Path]:
    """The env's installed engine (with its compiled modules) with ``tree``'s sources on top."""
    env_site = engines.find(engine, python=str(python)).site
    with tempfile.TemporaryDirectory(prefix="kimi-port-env-") as tmp:
        site = Path(tmp)
        shutil.copytree(env_site / engine, site / engine, symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__"))
        for src in (tree / engine).rglob("*.py"):
            shutil.copy2(src, site / src.relative_to(tree))
        info = next(tree.glob(f"{engine}-*.dist-info"))
        shutil.copytree(info, site / info.name)
        yield site


def _overlaid(engine: str, family_id: str, patches: Path, site: Path, python: Path) -> list[str]:
    opts = actions.Options(site=site, only=(family_id,), patches=patches, probes=False)
    r = actions.apply(engine, opts)
    install = replace(engines.find(engine, site=site), python=str(python))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(site)  # the env's interpreter imports the overlay first
    try:
        probes.run(install, r.statuses)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old
    return _check_probes(family_id, r.statuses)


def run(engine: str, version: str, family_id: str, patches: Path, shipped: Path, tree: Path, rels: set[str],
        *, probes_too: bool = True, env_release: str | None = None) -> tuple[bool, list[str]]:
    """(proven, what each step saw); the last line says what failed when not proven."""
    seen: list[str] = []
    try:
        seen += on_files(engine, family_id, patches, tree, rels)
        if probes_too:
            seen += in_cpu_env(engine, version, family_id, patches, shipped, tree, env_release)
    except AssertionError as exc:
        return False, [*seen, f"FAILED {exc}"]
    except PatcherError as exc:
        return False, [*seen, f"FAILED {exc.what} {exc.found}".strip()]
    return True, seen
