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
          "release files digest", b"torch==2.13.0+cpu\n", b"# shims\n", b"# cpu_env.py", "python 3.11.7"]


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


def test_inputs_written_together_are_settled_together(tmp_path: Path) -> None:
    def target(root: Path) -> Path:
        (root / "target").mkdir()
        (root / "target" / "config.json").write_text("{}")
        return root / "target"

    def drafter(root: Path) -> Path:
        (root / "drafter.json").write_text('{"x": 1}')
        return root / "drafter.json"

    first = recorded.settled_paths(_dir(tmp_path / "one"), target, drafter)
    assert [p.parent for p in first] == [first[0].parent] * 2 and first[1].read_text() == '{"x": 1}'
    assert recorded.settled_paths(_dir(tmp_path / "two"), target, drafter) == first


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


def _dir(path: Path) -> Path:
    path.mkdir()
    return path


def test_our_files_are_every_byte_of_patcher_and_patches(tmp_path: Path) -> None:
    def tree(name: str, diff: str = "+x\n", extra: dict[str, str] | None = None) -> Path:
        root = tmp_path / name
        for rel, text in {"patcher/cli.py": "code", "patches/vllm/f/a.diff": diff, "patches/vllm/f/probes.py": "p",
                          "README.md": "not ours to key", **(extra or {})}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    same = recorded.our_files(tree("a"))
    assert recorded.our_files(tree("b", extra={"README.md": "edited", "patcher/__pycache__/cli.pyc": "x"})) == same
    assert recorded.our_files(tree("c", diff="+y\n")) != same  # a mutated diff
    assert recorded.our_files(tree("d", extra={"patches/vllm/f/probes.py": "q"})) != same  # a mutated probe
    assert recorded.our_files(tree("e", extra={"patcher/engine_specs/x.py": ""})) != same  # a file added


def test_the_interpreter_is_keyed_by_version_not_by_the_worker_s_env_path(tmp_path: Path) -> None:
    def env(name: str, version: str) -> Path:
        (tmp_path / name / "bin").mkdir(parents=True)
        (tmp_path / name / "pyvenv.cfg").write_text(f"home = /py/bin\nversion = {version}\ncommand = venv {name}\n")
        return tmp_path / name / "bin" / "python"

    gw0, gw1 = env("envs/vllm-new", "3.11.7"), env("envs-gw1/vllm-new", "3.11.7")
    assert recorded.interpreter_version(gw0) == recorded.interpreter_version(gw1) == "3.11.7"
    assert recorded.interpreter_version(env("other/vllm-new", "3.12.1")) == "3.12.1"
    import platform  # an env not built yet: the Python that will build it, in the same form

    assert recorded.interpreter_version(tmp_path / "missing" / "bin" / "python") == platform.python_version()
