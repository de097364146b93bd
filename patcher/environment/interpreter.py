"""--python: is it a Python interpreter that runs? Asked before anything else is asked of it,
so a wrong path reads as what is wrong with it (not Python, exit status, its stderr),
never as a JSON decode error or one of our internal command lines."""

from __future__ import annotations

import subprocess

from patcher.errors import EngineError

_MARK = "kimi-patcher-python"
_ASK = f"import sys; print({_MARK!r}, sys.version_info[0], sys.version_info[1])"
_HINT = "pass the python of the environment that runs the engine (e.g. .engine/bin/python)"


def _first(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def check(python: str) -> None:
    """Raise an EngineError saying what is wrong with ``python``; return when it is a Python 3."""
    what = f"--python {python} is not a Python interpreter"
    try:
        proc = subprocess.run([python, "-c", _ASK], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EngineError(f"--python {python}: no such file", wanted="a Python interpreter",
                          found="nothing at that path", hint=_HINT) from None
    except PermissionError:
        raise EngineError(f"--python {python} cannot be run", wanted="an executable Python interpreter",
                          found="permission denied (not executable, or a folder)", hint=_HINT) from None
    except OSError as exc:
        raise EngineError(f"--python {python} cannot be run", wanted="a Python interpreter",
                          found=exc.strerror or str(exc), hint=_HINT) from None
    except subprocess.TimeoutExpired:
        raise EngineError(what, wanted="a Python interpreter", found="no answer within 60 s", hint=_HINT) from None
    words = next((ln.split() for ln in proc.stdout.splitlines() if ln.startswith(_MARK)), None)
    if proc.returncode == 0 and words and words[1] == "3":
        return
    if proc.returncode != 0:
        said = _first(proc.stderr) or _first(proc.stdout)
        found = f"exit status {proc.returncode}" + (f", stderr: {said}" if said else ", no output")
    elif words:
        found = f"Python {words[1]}.{words[2]}"
    else:
        said = _first(proc.stdout)
        found = "exit status 0, " + (f"printed {said!r}" if said else "no output")
    raise EngineError(what, wanted="a Python 3 interpreter", found=found, hint=_HINT)
