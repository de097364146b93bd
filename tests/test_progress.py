"""Issue 34 item 6: the tests' wheel fetches and environment builds run minutes, cold, inside
pytest's capture and xdist's workers; a person at a terminal sees a line for each, piped nothing."""

from __future__ import annotations

from tests.support import progress


def test_progress_goes_to_the_terminal_when_the_run_is_on_one(tmp_path, monkeypatch):
    tty = tmp_path / "tty"
    tty.write_text("")
    assert progress.destination(True, str(tty)) == str(tty)
    monkeypatch.setenv(progress.ENV, str(tty))
    progress.say("building vllm-new")
    assert tty.read_text() == "\n[tests] building vllm-new\n"


def test_no_progress_when_piped_or_without_a_terminal(tmp_path, monkeypatch):
    assert progress.destination(False, str(tmp_path / "tty")) is None  # piped: never
    assert progress.destination(True, str(tmp_path / "no" / "tty")) is None  # no controlling terminal
    monkeypatch.delenv(progress.ENV, raising=False)
    progress.say("nothing to say it to")  # no variable: a no-op, not an error
    monkeypatch.setenv(progress.ENV, str(tmp_path / "gone" / "tty"))
    progress.say("a terminal that went away")  # never fails a test
    assert not (tmp_path / "gone").exists()
