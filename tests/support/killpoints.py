"""Child-process driver for the reliability tests: run one patcher action, optionally SIGKILL it.

Usage: ``python -m tests.support.killpoints '<json config>'`` (cwd: the repository root).

Config keys:
- ``action``: "apply" | "revert" | "verify"; ``engine``; ``python`` / ``site``; ``patches``;
  ``only`` / ``skip`` (lists); ``probes`` (bool, default False).
- ``kill``: ``{"kind": "step", "n": N}`` kills before the N-th (0-based) call of
  ``write.commit``'s ``step`` callback (backup, journal, temporary, bytecode, rename,
  state, commit); ``{"kind": "op", "n": N}`` kills before the N-th file-system operation
  of the whole run (each ``_write_file``, ``os.replace``, ``Path.unlink`` / ``shutil.rmtree``
  under site-packages, bytecode removal, recompile), recovery included.
- ``log``: file to which every step / op name is appended (flushed before any kill), so the
  parent learns how many kill points a run has.
- ``gate``: a path; the action starts only once it exists (to line up racing processes).

Prints one JSON line: ``{"exit", "changed", "notes", "states"}`` or ``{"exit", "error", "kind"}``.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import sys
import time


def main(cfg: dict) -> int:
    from patcher.core import bytecode, write
    from patcher.errors import PatcherError
    from patcher.installer import actions

    log = open(cfg["log"], "a") if cfg.get("log") else None  # noqa: SIM115 - lives until exit
    kill = cfg.get("kill") or {}
    site_root = [None]
    count = {"step": 0, "op": 0}

    def note(kind: str, name: str) -> None:
        if log is not None:
            log.write(f"{kind} {name}\n")
            log.flush()
            os.fsync(log.fileno())
        if kill.get("kind") == kind and count[kind] == kill["n"]:
            os.kill(os.getpid(), signal.SIGKILL)
        count[kind] += 1

    def step(name: str) -> None:
        note("step", name)

    # A wrapper, not commit.__defaults__: the same hook then also reaches a wrapped commit
    # (mutmut's trampolines), so the kill-point tests can judge mutants too.
    real_commit = write.commit
    write.commit = lambda *a, **kw: real_commit(*a, **{"step": step, **kw})

    def under_site(p) -> bool:
        root = site_root[0]
        return root is not None and str(p).startswith(str(root))

    real_write_file = write._write_file

    def write_file(path, data, *a, **kw):
        note("op", f"write {path}")
        return real_write_file(path, data, *a, **kw)

    write._write_file = write_file

    real_replace = os.replace

    def replace(src, dst, *a, **kw):
        if under_site(dst):
            note("op", f"replace {src} -> {dst}")
        return real_replace(src, dst, *a, **kw)

    os.replace = replace

    real_unlink = pathlib.Path.unlink

    def unlink(self, missing_ok=False):
        if under_site(self) and self.exists():
            note("op", f"unlink {self}")
        return real_unlink(self, missing_ok=missing_ok)

    pathlib.Path.unlink = unlink

    real_rmtree = shutil.rmtree

    def rmtree(path, *a, **kw):
        if under_site(path) and os.path.exists(path):
            note("op", f"rmtree {path}")
        return real_rmtree(path, *a, **kw)

    shutil.rmtree = rmtree

    real_remove = bytecode.remove

    def remove(install, rels):
        note("op", f"bytecode-remove {rels}")
        return real_remove(install, rels)

    bytecode.remove = remove

    real_recompile = bytecode.recompile

    def recompile(install, items):
        note("op", f"recompile {len(items)}")
        return real_recompile(install, items)

    bytecode.recompile = recompile

    real_find = actions.engines.find

    def find(*a, **kw):
        install = real_find(*a, **kw)
        site_root[0] = install.site
        return install

    actions.engines.find = find

    if cfg.get("gate"):
        gate = pathlib.Path(cfg["gate"])
        pathlib.Path(f"{gate}.{os.getpid()}.ready").touch()
        deadline = time.monotonic() + 60
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.005)

    opts = actions.Options(python=cfg.get("python"), site=pathlib.Path(cfg["site"]) if cfg.get("site") else None,
                           only=tuple(cfg.get("only", ())), skip=tuple(cfg.get("skip", ())),
                           probes=cfg.get("probes", False), patches=pathlib.Path(cfg["patches"]),
                           lock_timeout=cfg.get("lock_timeout", 120.0))
    try:
        report = getattr(actions, cfg["action"])(cfg["engine"], opts)
    except PatcherError as exc:
        print(json.dumps({"exit": exc.exit_code, "error": exc.what, "kind": type(exc).__name__}))
        return 0
    print(json.dumps({"exit": report.exit_code(opts.strict), "changed": report.changed, "notes": report.notes,
                      "states": {s.family.id: s.state.value for s in report.statuses}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(json.loads(sys.argv[1])))
