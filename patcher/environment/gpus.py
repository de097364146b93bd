"""The GPUs of this host, where the driver answers: their compute capability major ("9", "12").

``doctor`` judges whether a launch meets a family that matters only on some GPUs (the SM 12.x
fusion gate). On the GPU host ``nvidia-smi`` tells; on a build host it is absent, and the answer is
None: "not seen here" (``doctor --gpu`` says it instead). Never imports a GPU library.
"""

from __future__ import annotations

import shutil
import subprocess

_SEEN: list[str | None] = []  # one query per process


def major() -> str | None:
    """The compute capability major all GPUs share, or None (no driver, no GPU, or mixed GPUs)."""
    if not _SEEN:
        _SEEN.append(_query())
    return _SEEN[0]


def _query() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    majors = {line.strip().split(".")[0] for line in out.splitlines() if line.strip()[:1].isdigit()}
    return majors.pop() if len(majors) == 1 else None


def parse(text: str) -> str:
    """``--gpu``: "sm120", "SM90", "12.0", "9" -> the major ("12", "9"); ValueError otherwise."""
    t = text.strip().lower().removeprefix("sm").removeprefix("_")
    if "." in t:
        t = t.split(".", 1)[0]
    elif len(t) == 3 and t.isdigit():  # sm120, sm100
        t = t[:2]
    elif len(t) == 2 and t.isdigit() and t.endswith("0") and t != "10":  # sm90 -> 9
        t = t[0]
    if not t.isdigit() or not 1 <= int(t) <= 99:
        raise ValueError(text)
    return str(int(t))
