"""A real ``docker build`` of an image whose SGLang is an editable checkout, laid out as SGLang's
own images lay it (issue 42): the README's Docker step applies in the build, and its HEALTHCHECK
passes in the running container.

SGLang's ``docker/Dockerfile`` clones the release tag into ``/sgl-workspace/sglang`` and runs
``pip install -e "python[all]"``. Here the checkout's ``python/sglang`` is the published 0.5.9
package (the files the tag holds), with a ``pyproject.toml`` naming the release, installed by pip's
own PEP 660 editable install (``--no-deps``: the engine's dependencies do not matter to what is
patched, and the build has no network). kimi-patcher goes in as the README installs it, from a
wheel of this checkout, then ``python -m patcher apply --engine sglang`` runs as the README's
``RUN`` line does and the README's ``HEALTHCHECK`` is the image's.

The base image is Debian bookworm with Python, made by ``debootstrap`` (Debian's own packages, no
image registry) and kept as a Docker image between runs. Full tier. Where no Docker engine can be
reached or started (no ``dockerd``, not root, no ``debootstrap``), the test says ``skipped`` with
the reason; ``.ci/run`` installs ``docker.io`` and ``debootstrap`` from Debian's packages first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patcher.maintainer import wheels

pytestmark = [pytest.mark.full, pytest.mark.wheels, pytest.mark.xdist_group("docker")]

ROOT = Path(__file__).resolve().parent.parent
BASE = "kimi-patcher-test-base:bookworm"
VERSION = "0.5.9"
# Built in the image from local wheels only (the build has no network): setuptools and wheel for
# pip's editable install of the checkout, kimi-patcher's own dependencies for the patcher.
BUILD_WHEELS = ["setuptools>=68", "wheel", "unidiff>=0.7.5", "packaging>=23", "importlib-metadata>=6"]

DOCKERFILE = f"""\
FROM {BASE}
ENV PATH=/opt/venv/bin:$PATH
COPY wheels /tmp/wheels
RUN python3 -m venv /opt/venv && pip install -q --no-index --find-links /tmp/wheels setuptools wheel
# SGLang's image: the release tag's checkout, installed editable
COPY sglang /sgl-workspace/sglang
RUN pip install -q --no-index --no-deps --no-build-isolation -e /sgl-workspace/sglang/python
# The README's step, as written there (the wheel stands for its git URL)
RUN pip install --no-cache-dir -q --no-index --find-links /tmp/wheels kimi-patcher \\
 && python -m patcher apply --engine sglang
HEALTHCHECK --interval=2s --timeout=60s --retries=3 CMD python -m patcher verify --no-probes -q
"""

CHECKOUT_PYPROJECT = f"""\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "sglang"
version = "{VERSION}"

[tool.setuptools.packages.find]
include = ["sglang*"]
"""


_DAEMON: list[subprocess.Popen] = []  # the dockerd started here: it serves the module's tests


@pytest.fixture(autouse=True, scope="module")
def _stop_the_daemon_started_here():
    """A dockerd this module started is stopped with it (left running, Popen warns at exit)."""
    yield
    for daemon in _DAEMON:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
INSIDE = ("docker", "run", "--rm", "--network=none")  # a command in a fresh container of the image


def run(*argv: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def docker_engine() -> str | None:
    """None when a Docker engine answers (started here if it can be), else why not."""
    if not shutil.which("docker"):
        return "no docker client on this machine"
    if run("docker", "info", timeout=60).returncode == 0:
        return None
    if not shutil.which("dockerd"):
        return "no Docker engine answers and there is no dockerd to start (Debian: apt-get install docker.io)"
    if os.geteuid() != 0:
        return "no Docker engine answers, and starting dockerd needs root"
    log = Path(os.environ.get("TMPDIR", "/tmp")) / "kimi-patcher-dockerd.log"
    with open(log, "w") as fh:
        # No bridge and no iptables: nothing here needs a network (the build installs from local
        # wheels), and a CI container may not allow either.
        _DAEMON.append(subprocess.Popen(["dockerd", "--iptables=false", "--bridge=none"], stdout=fh,
                                        stderr=subprocess.STDOUT, start_new_session=True))
    for _ in range(60):
        time.sleep(1)
        if run("docker", "info", timeout=60).returncode == 0:
            return None
    tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
    return f"dockerd did not start in 60 s: {tail}"


def base_image(tmp_path: Path) -> str | None:
    """None when the base image is there (made with debootstrap if missing), else why not."""
    if run("docker", "image", "inspect", BASE, timeout=60).returncode == 0:
        return None
    if not shutil.which("debootstrap"):
        return "no debootstrap to make the Debian base image (apt-get install debootstrap)"
    rootfs = tmp_path / "rootfs"
    got = run("debootstrap", "--variant=minbase", "--include=python3,python3-venv", "bookworm", str(rootfs),
              "http://deb.debian.org/debian", timeout=900)
    if got.returncode != 0:
        return f"debootstrap failed: {(got.stdout + got.stderr).strip().splitlines()[-1:]}"
    # The context closes our end of the pipe and waits for tar: a pipe left open is a
    # ResourceWarning that pytest reports against this test.
    with subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE) as tar:
        imported = run("docker", "import", "-", BASE, stdin=tar.stdout, timeout=600)
    shutil.rmtree(rootfs, ignore_errors=True)
    return None if imported.returncode == 0 else f"docker import failed: {imported.stderr.strip()[-300:]}"


def context(folder: Path) -> Path:
    """The build context: the checkout, this repository's wheel and the wheels it needs."""
    checkout = folder / "sglang" / "python"
    shutil.copytree(wheels.tree("sglang", VERSION) / "sglang", checkout / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "pyproject.toml").write_text(CHECKOUT_PYPROJECT)
    out = folder / "wheels"
    for argv in (["wheel", "--no-deps", "-w", str(out), str(ROOT)],
                 ["download", "--only-binary=:all:", "--python-version", "3.11", "-d", str(out), *BUILD_WHEELS]):
        got = run(sys.executable, "-m", "pip", "-q", *argv)
        assert got.returncode == 0, got.stderr[-2000:]
    (folder / "Dockerfile").write_text(DOCKERFILE)
    return folder


def test_a_docker_build_on_an_editable_sglang_checkout_applies_and_its_healthcheck_passes(tmp_path):
    why = docker_engine() or base_image(tmp_path)
    if why:
        pytest.skip(why)
    tag = f"kimi-patcher-test-editable:{os.getpid()}"
    built = run("docker", "build", "--network=none", "-t", tag, str(context(tmp_path / "ctx")), timeout=1200)
    assert built.returncode == 0, (built.stdout + built.stderr)[-4000:]
    container = None
    try:
        # What the build left: every family in the wanted state, on the checkout's own files.
        got = run(*INSIDE, tag, "python", "-m", "patcher", "verify", "--no-probes", "--json")
        assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-2000:]
        (report,) = json.loads(got.stdout)
        assert report["site"] == "/sgl-workspace/sglang/python", report["site"]
        assert "editable checkout" in report["published_files"], report["published_files"]
        assert {s["state"] for s in report["families"]} <= {"applied", "upstream"}, report["families"]
        assert any(s["state"] == "applied" for s in report["families"])
        applied = {rel: st for f in report["families"] if f["state"] == "applied" for rel, st in f["files"].items()}
        assert applied and set(applied.values()) == {"applied"}, applied  # the checkout's bytes are ours
        published = wheels.tree("sglang", VERSION) / "sglang/srt/models/kimi_k25.py"
        inside = run(*INSIDE, tag, "cat", "/sgl-workspace/sglang/python/sglang/srt/models/kimi_k25.py")
        assert inside.returncode == 0 and inside.stdout != published.read_text()  # the file Python imports
        # The HEALTHCHECK, as Docker runs it in the container.
        container = run("docker", "run", "-d", "--network=none", tag, "sleep", "300").stdout.strip()
        status = ""
        for _ in range(90):
            status = run("docker", "inspect", "-f", "{{.State.Health.Status}}", container).stdout.strip()
            if status in ("healthy", "unhealthy"):
                break
            time.sleep(1)
        health = run("docker", "inspect", "-f", "{{json .State.Health}}", container).stdout
        assert status == "healthy", health[-2000:]
        said = json.loads(health)["Log"][-1]["Output"].strip().splitlines()
        # -q: Docker's health log keeps what is not ok and the closing line (was 11 lines, notes included)
        assert said[-1].startswith("exit 0: ") and not any("note:" in ln for ln in said), said
    finally:
        if container:
            run("docker", "rm", "-f", container)
        run("docker", "rmi", "-f", tag)


def test_the_dockerfile_here_runs_the_readmes_lines():
    """The image's RUN and HEALTHCHECK are the README's, word for word (the README is what users copy)."""
    readme = (ROOT / "README.md").read_text()
    step = " && python -m patcher apply --engine sglang\n"
    assert step in readme and step in DOCKERFILE
    assert "HEALTHCHECK CMD python -m patcher verify --no-probes -q" in readme
    assert DOCKERFILE.rstrip().endswith("CMD python -m patcher verify --no-probes -q")
