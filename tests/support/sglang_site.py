"""A site-packages holding SGLang 0.5.9's dist-info and the one file eagle3-drafter-keys patches,
and that family copied out of patches/: a real release for the tests that need one but not a
whole engine (test_hostile_inputs.py, test_docker_path.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent


SGLANG_FILES = ("sglang/srt/models/llama_eagle3.py",)


@pytest.fixture(scope="module")
def sglang_site(tmp_path_factory) -> Path:
    from patcher.maintainer import wheels

    src = wheels.tree("sglang", "0.5.9")
    dest = tmp_path_factory.mktemp("sglang") / "site"
    for info in src.glob("sglang-*.dist-info"):
        shutil.copytree(info, dest / info.name)
    for rel in SGLANG_FILES:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, dest / rel)
    return dest


@pytest.fixture
def sg(sglang_site, tmp_path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(sglang_site, site)
    return site


def released_family(tmp_path: Path) -> Path:
    root = tmp_path / "patches"
    shutil.copytree(REPO / "patches" / "sglang" / "eagle3-drafter-keys", root / "sglang" / "eagle3-drafter-keys")
    return root
