"""patcher/release/release_parser.py: the launch line read by the release's own parser.

The real parsers run in tests/test_doctor_spellings.py (CPU environments). Here, fast: which
tokens doctor's exact spellings cannot vouch for, the canonical rewrite, and the child protocol
and its cache, with a stand-in interpreter whose answers are written by the test, so that what
the cache holds and what a broken or hostile answer does are seen directly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from packaging.version import Version

from patcher.environment.engines import Install
from patcher.release import release_parser
from patcher.release.launch_command import parse

SGLANG = ["python", "-m", "sglang.launch_server"]


@pytest.mark.parametrize(("command", "unsure"), [
    # exact spellings, values, negative numbers: nothing to doubt
    ([*SGLANG, "--model-path", "m", "--tp-size", "8", "--speculative-algorithm", "EAGLE3"], []),
    ([*SGLANG, "--model-path", "m", "--max-running-requests", "-1", "--trust-remote-code"], []),
    (["vllm", "serve", "m", "--tensor_parallel_size", "8", "-tp", "8", "--max-model-len", "4096"], []),
    # argparse's prefixes of an option doctor reads
    ([*SGLANG, "--model-path", "m", "--speculative-algo", "EAGLE3"], ["--speculative-algo"]),
    ([*SGLANG, "--model-path", "m", "--tp-si=8"], ["--tp-si=8"]),
    (["vllm", "serve", "m", "--tensor-parallel", "8"], ["--tensor-parallel"]),
    # forms only the release's parser reads: --config, dotted, short and --spec-* aliases
    ([*SGLANG, "--config", "c.yaml"], ["--config"]),
    (["vllm", "serve", "m", "--speculative-config.method", "eagle3"], ["--speculative-config.method"]),
    (["vllm", "serve", "m", "-sc", "{}"], ["-sc"]),
    (["vllm", "serve", "m", "--spec-method", "eagle3", "--spec_model", "d"], ["--spec-method", "--spec_model"]),
    # SGLang's argparse does not take underscores: the release refuses what doctor would read
    ([*SGLANG, "--model-path", "m", "--tp_size", "8"], ["--tp_size"]),
])
def test_tokens_the_exact_spellings_cannot_vouch_for(command: list[str], unsure: list[str]) -> None:
    assert list(release_parser.unsure(parse(command))) == unsure


def test_the_canonical_line_holds_each_value_once_in_its_one_spelling() -> None:
    read_as = {"model": "--model", "tensor_parallel_size": "--tensor-parallel-size", "speculative_config": "-sc",
               "flag": "--flag", "off": "--off"}
    values = {"model": "m", "tensor_parallel_size": 8, "speculative_config": {"method": "eagle3"}, "flag": True,
              "off": False, "unread": "x"}
    assert release_parser.canonical(read_as, values) == [
        "--model", "m", "--tensor-parallel-size", "8", "-sc", '{"method": "eagle3"}', "--flag"]


def _stand_in(tmp_path: Path, lines: list[str], name: str = "python") -> tuple[Install, Path]:
    """An 'interpreter' that prints ``lines`` (whatever it is asked) and counts its runs."""
    runs = tmp_path / f"{name}.runs"
    script = tmp_path / name
    script.write_text("#!/bin/sh\n" f"[ $# -gt 2 ] && echo run >> {runs}\n"  # the child, not a look at sys.path
                      + "".join(f"cat <<'EOF'\n{ln}\nEOF\n" for ln in lines))
    script.chmod(0o755)
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    install = Install("vllm", Version("0.34.0"), site, site / "vllm-0.34.0.dist-info", {}, str(script), None,
                      None, None)
    return install, runs


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release_parser, "CACHE", tmp_path / "launch-cache")
    release_parser.forget()


def answer(**said) -> str:
    return release_parser.MARK + json.dumps(said)


def test_a_parsed_line_is_rewritten_and_cached_for_the_next_run(tmp_path: Path) -> None:
    values = {"model": "m", "tensor_parallel_size": 8, "pipeline_parallel_size": 1,
              "speculative_config": {"method": "eagle3", "model": "d"}}
    install, runs = _stand_in(tmp_path, ["log noise", answer(status="parsed", values=values)])
    cmd = parse(["vllm", "serve", "m", "--tensor-parallel", "8", "-sc", '{"method": "eagle3", "model": "d"}'])
    read, how = release_parser.read(cmd, install)
    assert (how.by, how.status, how.cached) == ("release", "parsed", False)
    assert (read.target, read.tp, read.drafter) == ("m", 8, "d")
    assert read.command == cmd.command  # the line as written is kept for the report
    again, how = release_parser.read(cmd, install)
    assert how.cached and again == read and runs.read_text().count("run") == 1
    other = parse(["vllm", "serve", "m", "-tp", "4"])  # another line is parsed anew
    release_parser.read(other, install)
    assert runs.read_text().count("run") == 2


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", '{"status": "parsed"}', '{"status": "parsed", "values": []}',
                                 '{"status": "rejected"}', '{"status": "maybe", "values": {}}'])
def test_an_altered_cache_entry_is_input_and_is_parsed_anew(tmp_path: Path, bad: str) -> None:
    install, runs = _stand_in(tmp_path, [answer(status="rejected", code=2, error="vllm: error: x")])
    cmd = parse(["vllm", "serve", "m"])
    release_parser.read(cmd, install)
    (entry,) = release_parser.CACHE.glob("*.json")
    entry.write_text(bad)
    _, how = release_parser.read(cmd, install)
    assert (how.status, how.error, how.cached) == ("rejected", "vllm: error: x", False)
    assert runs.read_text().count("run") == 2 and json.loads(entry.read_text())["status"] == "rejected"


@pytest.mark.parametrize("lines", [[], ["no marker"], [release_parser.MARK + "{broken"],
                                   [answer(status="parsed", values={})] * 2])
def test_an_answer_not_in_the_childs_shape_is_unavailable_never_a_reading(tmp_path: Path, lines: list[str]) -> None:
    install, _ = _stand_in(tmp_path, lines)
    cmd = parse(["vllm", "serve", "m", "--spec-method", "eagle3"])
    read, how = release_parser.read(cmd, install)
    assert (how.by, how.status, how.unsure) == ("spellings", "unavailable", ("--spec-method",))
    assert read == cmd and not list(release_parser.CACHE.glob("*.json"))  # nothing of it is kept


def test_where_the_parser_does_not_import_it_is_asked_once_per_interpreter(tmp_path: Path) -> None:
    install, runs = _stand_in(tmp_path, [answer(status="unavailable", error="ModuleNotFoundError: torch")])
    for tp in ("1", "2", "4"):
        _, how = release_parser.read(parse(["vllm", "serve", "m", "-tp", tp]), install)
        assert (how.status, how.error) == ("unavailable", "ModuleNotFoundError: torch")
    assert runs.read_text().count("run") == 1


def test_a_config_file_is_part_of_what_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    install, runs = _stand_in(tmp_path, [answer(status="parsed", values={"model": "m"})])
    cmd = parse(["vllm", "serve", "m", "--config", "c.yaml"])
    Path("c.yaml").write_text("tensor-parallel-size: 2\n")
    release_parser.read(cmd, install)
    release_parser.read(cmd, install)
    Path("c.yaml").write_text("tensor-parallel-size: 8\n")
    release_parser.read(cmd, install)
    assert runs.read_text().count("run") == 2


def test_what_the_line_s_paths_name_keys_the_answer_and_the_working_directory_only_through_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The start-up reads the model's and drafter's configs: an edit asks anew, the same bytes
    written back do not; a line of absolute paths asked from another checkout is the same answer
    (CI clones anew each run), a relative path is not."""
    install, runs = _stand_in(tmp_path, [answer(status="parsed", values={"model": "m"})])
    target, drafter = tmp_path / "target", tmp_path / "drafter"
    for folder in (target, drafter):
        folder.mkdir()
        (folder / "config.json").write_text('{"num_hidden_layers": 61}')
    line = ["vllm", "serve", str(target), "-sc", json.dumps({"method": "eagle3", "model": str(drafter)})]
    asked = []

    def ask(words: list[str], where: Path = tmp_path) -> None:
        where.mkdir(exist_ok=True)
        monkeypatch.chdir(where)
        release_parser.read(parse(words), install)
        asked.append(runs.read_text().count("run"))

    ask(line)
    ask(line, tmp_path / "another-checkout")                     # absolute paths: the same answer
    (drafter / "config.json").write_text('{"num_hidden_layers": 1}')
    ask(line)                                                     # the drafter's config edited
    (drafter / "config.json").write_text('{"num_hidden_layers": 1}')
    ask(line)                                                     # the same bytes, a new mtime
    (target / "tokenizer_config.json").write_text("{}")
    ask(line)                                                     # a file added to the target
    relative = ["vllm", "serve", "target"]
    ask(relative)
    ask(relative, tmp_path / "another-checkout")                  # "target" names nothing there
    (tmp_path / "another-checkout" / "target").mkdir()
    ask(relative, tmp_path / "another-checkout")                  # ... and now another folder
    (tmp_path / "c.yaml").write_text(f"model: {target}\n")
    ask(["vllm", "serve", "--config=c.yaml"])
    (target / "config.json").write_text('{"num_hidden_layers": 2}')
    ask(["vllm", "serve", "--config=c.yaml"])                     # a config file's paths are read too
    assert asked == [1, 1, 2, 2, 3, 4, 5, 6, 7, 8]


def test_a_cache_that_cannot_be_written_costs_time_not_an_error(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(release_parser, "CACHE", blocker / "launch")
    install, _ = _stand_in(tmp_path, [answer(status="parsed", values={"model": "m"})])
    _, how = release_parser.read(parse(["vllm", "serve", "m"]), install)
    assert how.status == "parsed" and os.path.isfile(blocker)


def _python_stand_in(tmp_path: Path, body: str) -> tuple[Install, Path]:
    """An 'interpreter' running ``body`` (Python) on the request it is sent; counts its runs. Asked
    what it is (``answers.interpreter_digest``), it names its own site as its import path."""
    runs = tmp_path / "python.runs"
    script = tmp_path / "python"
    site = tmp_path / "site"
    look = f"print(json.dumps([sys.version, sys.implementation.cache_tag, [{str(site)!r}]]))"
    script.write_text(f"#!{os.sys.executable}\nimport json, sys\nif len(sys.argv) < 4: {look}; sys.exit()\n"
                      f"open({str(runs)!r}, 'a').write('run\\n')\n"
                      f"MARK = {release_parser.MARK!r}\nreq = json.loads(sys.argv[-1])\n{body}")
    script.chmod(0o755)
    site.mkdir(exist_ok=True)
    return Install("vllm", Version("0.34.0"), site, site / "vllm-0.34.0.dist-info", {}, str(script), None,
                   None, None), runs


def test_a_copy_of_the_interpreter_finds_the_answer_and_an_upgrade_asks_anew(tmp_path: Path) -> None:
    """Each test worker builds its own copy of a release's environment: one answer serves both,
    by what the interpreter is, not where it lives; an upgraded distribution in it asks anew."""
    body = 'print(MARK + json.dumps({"status": "parsed", "values": {"model": "m"}}), flush=True)'
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs-gw1").mkdir()
    one, _ = _python_stand_in(tmp_path / "envs", body)
    copy, _ = _python_stand_in(tmp_path / "envs-gw1", body)
    for install in (one, copy):
        (install.site / "torch-2.13.0+cpu.dist-info").mkdir()
    cmd = parse(["vllm", "serve", "m"])
    assert [release_parser.read(cmd, i)[1].cached for i in (one, copy, one)] == [False, True, True]
    (copy.site / "torch-2.13.0+cpu.dist-info").rename(copy.site / "torch-2.14.0+cpu.dist-info")
    assert [release_parser.read(cmd, i)[1].cached for i in (copy, copy, one)] == [False, True, True]


def test_the_table_and_the_lines_spelled_from_it_take_one_interpreter(tmp_path: Path) -> None:
    """The tests spell each release's options from its table: one import for both, and what it
    reads is cached for doctor's next run."""
    install, runs = _python_stand_in(tmp_path, """
print(MARK + json.dumps({"status": "table", "options": ["--model", "-tp"], "dests": {"model": ["--model"]},
                         "abbrev": True}), flush=True)
for line in json.loads(sys.stdin.read()):
    print(MARK + json.dumps({"status": "parsed", "values": {"model": line["argv"][-1]}}), flush=True)
""")
    seen = []

    def spell(table: dict) -> list:
        seen.append(table["options"])
        return [parse(["vllm", "serve", "--model", m]) for m in ("a", "b")]

    table, read = release_parser.table_then_read("vllm", install, spell)
    assert seen == [["--model", "-tp"]] and table["dests"] == {"model": ["--model"]}
    assert [(list(cmd.argv), r.status) for cmd, r in read] == [
        (["--model", "a"], "parsed"), (["--model", "b"], "parsed")]
    again = release_parser.read_many([parse(["vllm", "serve", "--model", "b"])], install)
    assert again[0][1].cached and runs.read_text().count("run") == 1


def test_a_parser_that_never_answers_is_unavailable_in_time(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(release_parser, "TIMEOUT", 1.0)
    install, _ = _python_stand_in(tmp_path, "import time\ntime.sleep(30)\n")
    (cmd, r), = release_parser.read_many([parse(["vllm", "serve", "m"])], install)
    assert (r.status, r.error) == ("unavailable", "the parser did not answer in 1 s") and r.seconds < 10


VALUES = {"model": "m", "tensor_parallel_size": 8, "pipeline_parallel_size": 1, "speculative_config": {}}


@pytest.mark.parametrize(("startup", "kept"), [
    ({"status": "refused", "error": "ValueError: no tokens"}, True),
    ({"status": "configured", "method": "eagle3", "tokens": 3, "draft": "d", "target": "m", "draft_tp": 1}, True),
    ({"status": "maybe"}, False),  # not a status the child writes
    ({"status": "refused", "error": ["a list"]}, False),  # a value not of the child's shape
    ("refused", False),
])
def test_the_start_up_answer_is_input_too(tmp_path: Path, startup: object, kept: bool) -> None:
    """doctor asks the release's start-up configuration (issue 53) with the parse: what comes back
    is a verdict's ground, so an answer not in the child's shape is no answer (None), never a refusal."""
    install, runs = _stand_in(tmp_path, [answer(status="parsed", values={**VALUES, "_startup": startup})])
    _, how = release_parser.read(parse(["vllm", "serve", "m", "-tp", "8"]), install)
    assert how.startup == (startup if kept else None)



def test_the_command_s_assignments_hold_while_start_up_runs_and_no_longer(monkeypatch):
    """The child runs many lines in one process: one line's VAR=value, and what start-up code
    writes into the environment, must not reach the next line's reading."""
    from patcher.engine_specs.parser_child_common import launch_environ

    monkeypatch.setenv("KIMI_TEST_KEPT", "1")
    monkeypatch.delenv("KIMI_TEST_GIVEN", raising=False)
    with launch_environ({"env": {"KIMI_TEST_GIVEN": "int8"}}):
        assert os.environ["KIMI_TEST_GIVEN"] == "int8" and os.environ["KIMI_TEST_KEPT"] == "1"
        os.environ["KIMI_TEST_WRITTEN_BY_START_UP"] = "x"
    assert "KIMI_TEST_GIVEN" not in os.environ and "KIMI_TEST_WRITTEN_BY_START_UP" not in os.environ
    assert os.environ["KIMI_TEST_KEPT"] == "1"
