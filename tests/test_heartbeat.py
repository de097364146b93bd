"""A slow step says so at a terminal (issue 58: doctor was silent ~12 s on its first parse)."""

from __future__ import annotations

import io
import time

from patcher.cli.heartbeat import Heartbeat


def test_a_slow_step_is_said_once_it_runs_long_then_again_with_its_time():
    err = io.StringIO()
    with Heartbeat(err, "doctor", first=0.1, every=0.3) as beat:
        beat.stage("fast")  # replaced before it is due: never said
        beat.stage("reading the line with sglang 0.5.23's own parser")
        time.sleep(0.8)
    lines = err.getvalue().splitlines()
    assert lines[0] == "doctor: reading the line with sglang 0.5.23's own parser ..."
    assert len(lines) >= 2 and all(ln.startswith("doctor: reading the line") and ln.endswith(" s)") for ln in lines[1:])
    assert not any("fast" in ln for ln in lines)


def test_a_fast_run_prints_nothing():
    err = io.StringIO()
    with Heartbeat(err, "doctor", first=0.5, every=1.0) as beat:
        beat.stage("reading the install")
        time.sleep(0.05)
        beat.stage("asking the loader")
    assert err.getvalue() == ""
