"""The installed engine: release, install root, RECORD hashes, and which copy Python imports.

Never imports the engine: the interpreter is asked where the package *would* be
imported from (``find_spec``) and which distributions are on its path.
"""

from __future__ import annotations

import base64
import csv
import functools
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import importlib_metadata
from packaging.version import InvalidVersion, Version

from patcher import engine_specs
from patcher.environment import _introspect, checkout, interpreter
from patcher.environment.paths import plain_rel
from patcher.errors import EngineError, NotInstalled

RECORD_TRUTH = "the wheel's RECORD"
# uv's --link-mode=symlink leaves every installed file a symlink into its cache (a write would
# edit the cache, and every venv sharing it); copies are what pip and uv's default make.
_REINSTALL = "reinstall the engine as copies: 'uv pip install --link-mode=copy --reinstall-package {dist}' " \
             "(uv's symlink mode), or {restore}"


def sha256_record(data: bytes) -> str:
    """A file hash as RECORD writes it: ``sha256=<urlsafe base64, unpadded>``."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class Install:
    engine: str
    version: Version
    site: Path  # the directory that holds the engine package
    dist_info: Path
    record: dict[str, str]  # path relative to site -> RECORD hash
    python: str | None  # interpreter that runs the engine; None: --site without --python
    python_version: str | None
    cache_tag: str | None
    pycache_prefix: str | None
    others: dict[str, str] = field(default_factory=dict)  # other distributions -> version
    shadowed: tuple[str, ...] = ()  # other copies of the engine that Python does not import
    # What "published" means for these files: the wheel's RECORD, or for an editable checkout
    # (no RECORD of its files) the hashes the release published, shipped with the patch set.
    truth: str = "the wheel's RECORD"  # RECORD_TRUTH
    package: str = ""  # the top-level package Python imports; "": the engine's name

    def __post_init__(self) -> None:
        if not self.package:
            object.__setattr__(self, "package", self.engine)

    def restore_command(self, rels: list[str] | tuple[str, ...] = ()) -> str:
        """The command that puts the published files back, pasteable as it is: the checkout's own git
        for an editable install (the files named), else this environment's own pip (a bare 'pip' may
        be another environment's)."""
        if self.truth != RECORD_TRUTH:  # an editable checkout: a wheel installed over it is not the way
            if rels:
                return f"git -C {self.site} checkout -- {' '.join(rels)}"
            return (f"git -C {self.site} status lists the changed files; "
                    f"git -C {self.site} checkout -- <path> restores one")
        distribution = engine_specs.names(self.engine)[0]
        command = f"-m pip install --force-reinstall --no-deps {distribution}=={self.version}"
        if self.python:
            return f"{self.python} {command}"
        return f"python {command}, run with the python whose site-packages is {self.site}"

    def _reinstall(self) -> str:
        return _REINSTALL.format(dist=engine_specs.names(self.engine)[0], restore=self.restore_command())

    def path(self, rel: str) -> Path:
        """Absolute path of an engine file, refusing anything that is not one of its installed files.

        ``rel`` may come from our own bookkeeping (journal, state), which anyone who can write in
        site-packages can forge: it must be a plain relative path listed in RECORD, and neither the
        file nor any folder between site-packages and it may be a symlink."""
        if not isinstance(rel, str) or not plain_rel(rel) or rel not in self.record:
            raise EngineError(f"{rel!r} is not a file of the installed {self.engine}",
                              wanted=f"a relative path listed in {self.dist_info.name}/RECORD", found=repr(rel)[:200],
                              hint="our diffs and bookkeeping only name files the wheel installed")
        p = os.path.join(self.site, rel)
        # Resolved on every call, never remembered per folder: a folder made a link after an earlier read
        # is refused all the same (tests/test_engines.py).
        root, real = self._real_site, os.path.realpath(p)
        if not _inside(real, root):
            raise EngineError(f"{rel} leads outside site-packages", wanted=str(self.site), found=real,
                              hint=f"we never read or write through symlinks; {self._reinstall()}")
        if os.path.islink(p):
            raise EngineError(f"{rel} is a symlink", wanted="a regular file", found=f"symlink to {real}",
                              hint=f"we never write through symlinks; {self._reinstall()}")
        if real != os.path.join(root, rel):
            raise EngineError(f"{rel} passes through a symlinked directory", wanted=os.path.join(root, rel),
                              found=real, hint=f"we never write through symlinks; {self._reinstall()}")
        return Path(p)

    @functools.cached_property
    def _real_site(self) -> str:
        """site-packages itself resolved, once: it may be a link (a venv's lib64), the files under it
        may not. A scope reading walks thousands of files, and each resolved it anew (issue 57)."""
        return os.path.realpath(self.site)

    def read(self, rel: str) -> bytes | None:
        try:
            return self.path(rel).read_bytes()
        except FileNotFoundError:
            return None

    def pristine(self, rel: str, data: bytes) -> bool:
        return self.record.get(rel) == sha256_record(data)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _record(dist_info: Path) -> dict[str, str]:
    try:
        text = (dist_info / "RECORD").read_text(encoding="utf-8")
    except OSError as exc:
        raise EngineError(f"cannot read {dist_info / 'RECORD'}", found=str(exc),
                          hint="reinstall the engine with pip") from None
    out = {}
    for line in text.splitlines():
        # path,hash,size; a path holding a comma is quoted, and only then do we need csv
        row = next(csv.reader([line])) if line.startswith('"') else line.rsplit(",", 2)
        if row and plain_rel(row[0]):
            out[row[0]] = row[1] if len(row) > 1 else ""
    return out


def _unrecorded(copy: dict) -> bool:
    """An install no RECORD lists the files of: an editable one, or a legacy develop egg-info."""
    dist_info = Path(copy["dist_info"])
    return checkout.editable(dist_info) or not (dist_info / "RECORD").is_file()


def _describe(engine: str, python: str | None, site: Path | None, wanted: list[str]) -> dict:
    distribution, package = engine_specs.names(engine)
    if site is not None:
        if not site.is_dir():
            raise EngineError(f"{site} is not a directory", wanted="the site-packages directory holding the engine",
                              found=str(site))
        dists = list(importlib_metadata.distributions(path=[str(site)], name=distribution))
        pkg = site / package
        if not pkg.is_dir():  # an editable install: the package is where its .pth or finder says
            pkg = checkout.package(site, package, dists) or pkg
        others = {}
        for name in wanted:
            found = [d for d in importlib_metadata.distributions(path=[str(site)], name=name)]
            if found:
                others[name.lower().replace("_", "-")] = found[0].version
        return {"executable": python, "python": None, "cache_tag": None, "pycache_prefix": None,
                "imported": str(pkg) if pkg.is_dir() else None,
                "copies": [{"dist_info": str(d._path), "version": d.version} for d in dists],  # type: ignore[attr-defined]
                "others": others}
    # Compare paths without resolving symlinks: a venv's python is a symlink to its base.
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        info = _introspect.describe(package, distribution, wanted)
        info["executable"] = sys.executable
        return info
    try:
        out = subprocess.run([python, "-c", Path(_introspect.__file__).read_text(), package, distribution, *wanted],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return json.loads(out)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as exc:
        raise EngineError(f"cannot inspect the interpreter {python}", found=str(exc).strip()[:200],
                          hint="pass the python of the environment that runs the engine") from None


def _one_copy_beside(engine: str, pkg_dir: Path, copies: list[dict]) -> None:
    """Two dist-infos of the engine beside the package it imports: pip's leftovers of an install
    that was interrupted, or of two installs racing. Each RECORD claims the same folder, whose files
    are one release's at most, and which one cannot be told from the metadata: refuse, never guess."""
    # resolved: a venv's lib64 -> lib puts one dist-info on sys.path under two names
    beside = {Path(c["dist_info"]).resolve(): c["version"] for c in copies
              if Path(c["dist_info"]).parent.resolve() == pkg_dir.parent.resolve()}
    if len(beside) > 1:
        found = ", ".join(f"{v} ({d.name})" for d, v in sorted(beside.items()))
        raise EngineError(f"{engine} is installed {len(beside)} times in {pkg_dir.parent}",
                          wanted=f"one {engine} distribution beside the package Python imports", found=found,
                          hint=f"an interrupted pip install leaves one behind: run 'pip uninstall -y "
                               f"{engine_specs.names(engine)[0]}' until none is left, then install the release "
                               f"you want")


def find(engine: str, *, python: str | None = None, site: Path | None = None,
         wanted: tuple[str, ...] = (), published: Path | None = None) -> Install:
    """The copy of ``engine`` that the target interpreter imports, or an EngineError. ``published``:
    the patch set's folder, whose ``<engine>/published.json`` proves an editable checkout's files."""
    info = _describe(engine, python, site, list(wanted))
    interp = info["executable"]
    label = f"python: {interp}" if interp else f"site: {site}"
    if not info["copies"]:
        raise NotInstalled(f"{engine} is not installed", wanted=f"a {engine} distribution", found=f"none ({label})",
                          hint="install it first, or pass --python / --site for the right environment")
    if info["imported"] is None:
        raise EngineError(f"{engine} is installed but not importable", found=label)
    pkg_dir = Path(info["imported"])
    _one_copy_beside(engine, pkg_dir, info["copies"])
    chosen = None
    for copy in info["copies"]:
        dist_info = Path(copy["dist_info"])
        if dist_info.parent.resolve() == pkg_dir.parent.resolve():
            chosen = copy
    source = None
    if chosen is None or _unrecorded(chosen):
        # An editable checkout (PEP 660's direct_url.json, a legacy develop egg-info without a
        # RECORD): the files Python imports are the checkout's, and they are the engine's files.
        source = next((c for c in ([chosen] if chosen else info["copies"]) if _unrecorded(c)), None)
        if source is None:
            places = ", ".join(str(Path(c["dist_info"]).parent) for c in info["copies"])
            raise EngineError(f"{engine} is imported from {pkg_dir}, not from the copy installed at {places}",
                              wanted=f"the copy installed at {places}", found=f"{pkg_dir} ({label})",
                              hint="a folder on PYTHONPATH or sys.path shadows the installed engine: remove it "
                                   "from the path, or install that folder with 'pip install -e'")
        chosen = source
    assert chosen is not None
    dist_info = Path(chosen["dist_info"])
    try:
        version = Version(chosen["version"])
    except InvalidVersion:
        raise EngineError(f"{engine} has an invalid version", found=repr(chosen["version"])) from None
    mine = dist_info.resolve()  # itself under another name on the path is no other copy
    shadowed = tuple(dict.fromkeys(str(Path(c["dist_info"]).parent) for c in info["copies"]
                                   if Path(c["dist_info"]).resolve() != mine))
    if source is not None:
        record, truth = checkout.record(engine, version, pkg_dir, published)
    else:
        record, truth = _record(dist_info), RECORD_TRUTH
    return Install(engine, version, pkg_dir.parent, dist_info, record, interp,
                   info.get("python"), info.get("cache_tag"), info.get("pycache_prefix"),
                   dict(info.get("others", {})), shadowed, truth, engine_specs.names(engine)[1])


def locate(engine: str, *, python: str | None = None, site: Path | None = None,
           wanted: tuple[str, ...] = (), published: Path | None = None) -> Install:
    """``find`` in the environment the user named (--python or --site; else this interpreter's),
    with both named, or an interpreter that is not Python, said first: how every command that
    acts on one engine finds it."""
    if python is not None and site is not None:
        raise EngineError("--python and --site both name the environment",
                          wanted="one of them", found=f"--python {python} --site {site}")
    if python is not None:
        interpreter.check(python)
    try:
        return find(engine, python=python, site=site, wanted=wanted, published=published)
    except NotInstalled as exc:
        if python is None and site is None:
            raise
        flag = "--python" if python else "--site"
        raise NotInstalled(exc.what, wanted=exc.wanted, found=exc.found,
                           hint=f"install it there, or point {flag} at the environment that has it") from None


def find_first(names: list[str], *, python: str | None = None, site: Path | None = None,
               strict: bool = False) -> tuple[Install | None, NotInstalled | None]:
    """The first of ``names`` installed there, in order, and the last "not installed" error when
    none is. ``strict``: an engine that is there but cannot be used raises instead of being passed
    over (an environment the user named must hold a usable engine)."""
    missing: NotInstalled | None = None
    for name in names:
        try:
            return find(name, python=python, site=site), None
        except NotInstalled as exc:
            missing = exc
        except EngineError:
            if strict:
                raise
    return None, missing
