"""patcher/environment/interpreter.py: a --python that is not a Python 3 interpreter is exit 2 with what it is
(its exit status and what it printed), before anything reads the engine."""

from __future__ import annotations

import stat

from tests.support.cli_on_release import cli

SCRIPT = "#!/bin/sh\necho hello\n"


def test_python_that_is_a_shell_script_is_exit_2(tmp_path):
    script = tmp_path / "python"
    script.write_text(SCRIPT)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    code, out, err = cli("verify", "--engine", "sglang", "--python", script)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"error: --python {script} is not a Python interpreter",
        "  wanted: a Python 3 interpreter",
        "  found:  exit status 0, printed 'hello'",
        "  hint:   pass the python of the environment that runs the engine (e.g. .engine/bin/python)"]


def test_python_that_fails_is_exit_2():
    code, _, err = cli("verify", "--engine", "sglang", "--python", "/bin/false")
    assert code == 2 and err.splitlines()[:3] == [
        "error: --python /bin/false is not a Python interpreter", "  wanted: a Python 3 interpreter",
        "  found:  exit status 1, no output"]
