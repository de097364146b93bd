"""The toy engine (tests/support/toy.py) pip-installed into a real virtualenv, and the helpers the
tests on it share: test_write, test_bytecode, test_probes, test_actions, test_lifecycle, test_detect,
test_docker_path.

A test module takes the fixtures by binding them (``venv = toy_venv.venv``), as pytest finds
fixtures among a module's names.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from patcher.cli.main import main
from patcher.core import manifest
from patcher.installer import actions
from tests.support import toy


def site_of(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def family(root: Path, extra: str = "") -> Path:
    """The toy family, with ``extra`` TOML appended to its manifest."""
    toy.write_family(root)
    manifest = root / toy.ENGINE / "fix" / "patch.toml"
    manifest.write_text(manifest.read_text() + extra)
    return root


@pytest.fixture
def venv(tmp_path, monkeypatch):
    """A venv for the toy engine; `--engine all` on the CLI means the toy engine here."""
    monkeypatch.setattr(manifest, "ENGINES", (toy.ENGINE,))
    python = toy.make_venv(tmp_path / "venv")
    return python, site_of(python)


def install(python: Path, tmp_path: Path, version: str = "1.0", core: str = toy.MODULE_V1, *extra: str) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir(exist_ok=True)
    toy.pip_install(python, toy.build_wheel(wheels, version, core), "--force-reinstall", *extra)


def cli(*argv: str) -> tuple[int, list | dict, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    text = out.getvalue()
    return code, (json.loads(text) if text.strip() else {}), err.getvalue()


def only(report) -> object:
    (st,) = report.statuses
    return st


class Killed(BaseException):
    """What a SIGKILL leaves behind, raised in-process: no except clause of ours runs."""


def as_engine(monkeypatch, name: str) -> None:
    """The toy wheel published under a real engine's name, so `--engine all` picks it up."""
    monkeypatch.setattr(toy, "ENGINE", name)


@pytest.fixture
def env(tmp_path):
    """The toy engine 1.0 pip-installed, its family written: (python, wheel, options, site)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    python = toy.make_venv(tmp_path / "venv")
    wheel = toy.build_wheel(wheels, "1.0")
    toy.pip_install(python, wheel)
    patches = toy.write_family(tmp_path / "patches")
    opts = actions.Options(python=str(python), patches=patches)
    return python, wheel, opts, site_of(python)


def state(report):
    (st,) = report.statuses
    return st
