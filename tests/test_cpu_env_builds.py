"""The CPU environments on a machine whose index has no ``+cpu`` build (issue 58): the locks pin
``torch==2.13.0+cpu``, which only PyTorch's own CPU index carries (the public index has the CUDA
build). patcher/maintainer/cpu_env.py installs each ``+cpu`` pin first: from pip's configured
index, else from ``TORCH_CPU_INDEX`` (said in a line), else it stops with the command that fixes it.

Hermetic: pip is given no configuration (``PIP_CONFIG_FILE`` is the null device), an empty local
index as its own, and a local index standing in for PyTorch's; the "torch" is a one-file wheel
with a ``+cpu`` version, so the same code path runs without a download.

The same hermetic pip swaps an engine over what a pip killed mid-install leaves behind (a second
dist-info, a ``~``-renamed stash): CI of 990efee found the wrong release imported after one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patcher.maintainer import cpu_env

PIN = "kimi-fake-cpu-build==1.0+cpu"


def _wheel(folder: Path, name: str = "kimi_fake_cpu_build", version: str = "1.0+cpu", code: str = "BUILD = 'cpu'\n",
           ) -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": code,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for n, text in {**files, f"{info}/RECORD": record}.items():
            zf.writestr(n, text)
    return path


def _index(root: Path, wheel: Path | None, *more: Path, project_name: str = "kimi-fake-cpu-build") -> str:
    """A PEP 503 index at root: empty, or holding the wheels given."""
    project = root / project_name
    project.mkdir(parents=True)
    links = "".join(f'<a href="{w.as_uri()}">{w.name}</a>' for w in filter(None, (wheel, *more)))
    (project / "index.html").write_text(f"<html><body>{links}</body></html>\n")
    return root.as_uri()


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A venv and a pip that sees only an empty index: no +cpu build anywhere it looks."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    # pip itself, from this interpreter: no download to make the venv
    site = next(env.glob("lib/python3*/site-packages"))
    import pip

    (site / "_ours.pth").write_text(str(Path(pip.__file__).parent.parent) + "\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", _index(tmp_path / "empty", None))
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CONSTRAINT"):
        monkeypatch.delenv(name, raising=False)
    lock = tmp_path / "line.txt"
    lock.write_text(f"# a lock as cpu_envs/*.txt are written\n{PIN}\n")
    return env / "bin" / "python", lock


def test_a_cpu_build_missing_from_the_index_comes_from_pytorch_s_cpu_index(machine, tmp_path, monkeypatch):
    python, lock = machine
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setattr(cpu_env, "TORCH_CPU_INDEX", _index(tmp_path / "cpu-index", _wheel(wheels)))
    said: list[str] = []
    cpu_env._install_lock(python, lock, log=said.append)
    assert said == [f"[cpu_env] {PIN} is not on pip's configured index; asking PyTorch's CPU index "
                    f"{cpu_env.TORCH_CPU_INDEX}"]
    got = subprocess.run([str(python), "-c", "import kimi_fake_cpu_build as m, importlib.metadata as md;"
                          "print(m.BUILD, md.version('kimi-fake-cpu-build'))"], capture_output=True, text=True)
    assert got.stdout.split() == ["cpu", "1.0+cpu"], got.stderr


def test_a_cpu_build_on_no_index_stops_with_the_command_that_fixes_it(machine, tmp_path, monkeypatch):
    python, lock = machine
    monkeypatch.setattr(cpu_env, "TORCH_CPU_INDEX", _index(tmp_path / "cpu-index", None))
    with pytest.raises(cpu_env.CpuBuildMissing) as missing:
        cpu_env._install_lock(python, lock, log=lambda _: None)
    text = str(missing.value)
    assert f"cannot install {PIN}" in text and f"wanted: {PIN}" in text and "found:  no such file" in text
    assert f"hint:   {python} -m pip install --no-deps --index-url URL {PIN}" in text


def test_every_lock_pins_torch_as_a_cpu_build_the_builder_installs_first():
    """The rule above reaches the real locks: each pins one +cpu torch, which is what it installs first."""
    for lock in sorted(cpu_env.lock_path(line) for *_, line in cpu_env.LINES):
        assert [p.split("==")[0] for p in cpu_env._cpu_builds(lock)] == ["torch"], lock.name


def test_a_swap_over_pip_s_leftovers_leaves_exactly_the_release_asked_for(machine, tmp_path, monkeypatch):
    python, _ = machine
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    made = {v: _wheel(wheels, "sglang", v, f"RELEASE = {v!r}\n") for v in ("0.5.90", "0.5.91", "0.5.92")}
    monkeypatch.setenv("PIP_INDEX_URL", _index(tmp_path / "engine-index", *made.values(), project_name="sglang"))
    env = python.parent.parent
    sp = cpu_env._site_packages(env)

    def pip_install(version: str) -> None:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", f"sglang=={version}"], check=True)

    def installed() -> list[str]:
        return sorted(d.name for d in sp.iterdir() if "glang" in d.name)

    # What a killed swap leaves: a second dist-info beside the first and pip's stash of a third.
    pip_install("0.5.90")
    (sp / "sglang-0.5.90.dist-info").rename(sp / "~glang-0.5.90.dist-info")
    pip_install("0.5.91")
    (sp / "sglang-0.5.90.dist-info").mkdir()
    for f in (sp / "sglang-0.5.91.dist-info").iterdir():
        text = f.read_text().replace("0.5.91", "0.5.90")
        (sp / "sglang-0.5.90.dist-info" / f.name).write_text(text)
    assert cpu_env._installed_version(env, "sglang") is None, "two dist-infos name no release"
    # pip alone removes one copy of the two: the reason the swap clears first.
    pip_install("0.5.92")
    assert len([d for d in installed() if d.startswith("sglang-")]) == 2, installed()

    cpu_env._swap_engine(env, "sglang", "0.5.91", log=lambda _: None)
    assert installed() == ["sglang", "sglang-0.5.91.dist-info"]
    got = subprocess.run([str(python), "-c", "import sglang, importlib.metadata as md;"
                          "print(sglang.RELEASE, md.version('sglang'))"], capture_output=True, text=True)
    assert got.stdout.split() == ["0.5.91", "0.5.91"], got.stderr
    assert (env / cpu_env._ENGINE_STATE).read_text() == "sglang==0.5.91\n"
    assert cpu_env._installed_version(env, "sglang") == "0.5.91"
