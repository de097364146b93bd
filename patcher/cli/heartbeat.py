"""A line now and then while a slow step runs, for a person at a terminal (issue 58).

``doctor``'s first look at a line imports the engine two or three times (its parser, its start-up
configuration, its loader): 10-20 s on 2 cores with nothing on the screen. The step names itself
(``stage``); a background thread says it once it has run ``first`` seconds, then every ``every``
seconds with the time so far. A fast run (a cached answer) prints nothing.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO


class Heartbeat:
    def __init__(self, err: TextIO, prefix: str, first: float = 3.0, every: float = 10.0) -> None:
        self._err, self._prefix, self._first, self._every = err, prefix, first, every
        self._stage, self._since, self._said = "", time.monotonic(), 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def stage(self, what: str) -> None:
        """The step now running, in words ("reading the line with sglang 0.5.23's own parser")."""
        with self._lock:
            self._stage, self._since, self._said = what, time.monotonic(), 0.0

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        tick = min(self._first, self._every) / 4
        while not self._stop.wait(tick):
            with self._lock:
                ran = time.monotonic() - self._since
                due = self._first if not self._said else self._said + self._every
                if not self._stage or ran < due:
                    continue
                self._said = ran
                line = f"{self._prefix}: {self._stage}" + (f" ({ran:.0f} s)" if ran >= self._every else " ...")
            print(line, file=self._err, flush=True)
