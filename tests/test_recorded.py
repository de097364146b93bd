"""The record of a release's own answers in the tests (tests/support/recorded.py, issue 57): every
input of the loader grid's truth is in its key, a record that disagrees with a fresh truth fails,
and settled inputs are found by their bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patcher.release import answers
from tests.support import recorded

# The inputs test_drafter_loader.py keys the oracle's truth by, in its order: the oracle, our child,
# the request, then recorded.release_parts.
INPUTS = ["oracle code", "loader child code", json.dumps([{"drafter": "/settled/abc", "files": ["x"]}]),
          "release files digest", b"torch==2.13.0+cpu\n", b"# shims\n", b"# cpu_env.py", "/envs/vllm-new/bin/python"]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(recorded, "TRUTHS", tmp_path / "truths")
    monkeypatch.setattr(recorded, "SETTLED", tmp_path / "settled")
    return tmp_path


@pytest.mark.parametrize("which", range(len(INPUTS)))
def test_changing_any_one_input_runs_the_proof_again(which: int) -> None:
    runs = []

    def compute() -> dict:
        runs.append(1)
        return {"n": len(runs)}

    assert recorded.truth("k", INPUTS, compute) == {"n": 1}
    assert recorded.truth("k", INPUTS, compute) == {"n": 1} and len(runs) == 1  # recorded
    changed = list(INPUTS)
    changed[which] = changed[which] + (b"!" if isinstance(changed[which], bytes) else "!")
    assert recorded.truth("k", changed, compute) == {"n": 2}


def test_parts_are_not_concatenated() -> None:
    assert recorded.key("ab", "c") != recorded.key("a", "bc")


def test_a_fresh_truth_unlike_the_record_fails() -> None:
    assert recorded.truth("k", INPUTS, lambda: {"said": "go"}) == {"said": "go"}
    assert recorded.truth("k", INPUTS, lambda: {"said": "go"}, fresh=True) == {"said": "go"}
    with pytest.raises(AssertionError, match="differs from the one computed now"):
        recorded.truth("k", INPUTS, lambda: {"said": "no-go"}, fresh=True)


def test_a_damaged_record_is_computed_again() -> None:
    recorded.truth("k", INPUTS, lambda: [1])
    (path,) = (recorded.TRUTHS / "k").glob("*.json")
    path.write_text("{")
    assert recorded.truth("k", INPUTS, lambda: [2]) == [2]
    assert answers.load(path) == [2]


def _made(root: Path, text: str = "{}") -> Path:
    (root / "d").mkdir(parents=True)
    (root / "d" / "config.json").write_text(text)
    return root


def test_settled_inputs_are_found_by_their_bytes(tmp_path: Path) -> None:
    home = recorded.settled(_made(tmp_path / "made"))
    assert (home / "d" / "config.json").read_text() == "{}"
    assert not (tmp_path / "made").exists()  # moved, not copied
    assert recorded.settled(_made(tmp_path / "again")) == home
    assert recorded.settled(_made(tmp_path / "other", '{"x": 1}')) != home
    (home / "d" / "config.json").write_text("tampered")  # a settled folder is checked, not believed
    assert (recorded.settled(_made(tmp_path / "once more")) / "d" / "config.json").read_text() == "{}"


def test_a_big_sparse_file_is_keyed_by_its_size_and_ends(tmp_path: Path) -> None:
    def sparse(name: str, size: int, at: int, byte: bytes) -> Path:
        root = tmp_path / name
        root.mkdir()
        with open(root / "model.safetensors", "wb") as fh:
            fh.truncate(size)
            fh.seek(at)
            fh.write(byte)
        return root

    big = recorded.BIG + (8 << 20)
    base = recorded.tree_digest(sparse("a", big, 0, b"h"))
    assert recorded.tree_digest(sparse("b", big, 0, b"h")) == base
    assert recorded.tree_digest(sparse("c", big, 0, b"H")) != base  # the header
    assert recorded.tree_digest(sparse("d", big + 1, 0, b"h")) != base  # the size
    assert recorded.tree_digest(sparse("e", big, big - 1, b"t")) != base  # the last tensor
