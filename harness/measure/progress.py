"""A text progress bar per measured scenario, and the highest load average seen while it ran.

On a terminal the bar is redrawn in place (``\\r``); elsewhere (CI logs, pipes) one line per step.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO


class Progress:
    """``[#####.....] 3/6  name: what  (12 s, load 1.8)`` on ``stream``.

    Args:
        name: what is being measured.
        total: the number of steps (may be raised later with `expect`).
        stream: where to draw (stderr by default); None: draw nothing, still count and watch the load.
        width: characters of the bar.

    Attributes:
        max_load: the highest 1-minute load average seen at a step.
    """

    def __init__(self, name: str, total: int = 1, stream: IO[str] | None = sys.stderr, width: int = 24) -> None:
        self.name, self.total, self.stream, self.width = name, max(1, int(total)), stream, width
        self.done = 0
        self.started = time.perf_counter()
        self.max_load = os.getloadavg()[0]
        self._tty = bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())

    def expect(self, total: int) -> None:
        """Sets the number of steps (never below the steps done)."""
        self.total = max(int(total), self.done, 1)

    def step(self, what: str = "", n: int = 1) -> None:
        """Marks ``n`` steps done and redraws, naming ``what`` comes next or was done."""
        self.done = min(self.done + n, max(self.total, self.done + n))
        self.total = max(self.total, self.done)
        self.max_load = max(self.max_load, os.getloadavg()[0])
        self._draw(what)

    def finish(self, what: str = "done") -> None:
        """Fills the bar and ends its line."""
        self.done = self.total
        self.max_load = max(self.max_load, os.getloadavg()[0])
        self._draw(what)
        if self.stream is not None and self._tty:
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, what: str) -> None:
        if self.stream is None:
            return
        filled = int(self.width * self.done / self.total)
        line = (f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total}  {self.name}: {what}  "
                f"({time.perf_counter() - self.started:.0f} s, load {os.getloadavg()[0]:.1f})")
        if self._tty:
            self.stream.write("\r" + line[:200].ljust(100))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
