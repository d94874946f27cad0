"""`ProgressBar`: the one-line progress bar `Trainer` draws on a terminal."""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO


class ProgressBar:
    """A one-line progress bar redrawn in place with ``\\r`` (at most every ``min_interval`` seconds).

    Args:
        total: the count at which the bar is full.
        stream: where to draw (default ``sys.stderr``).
        width: characters of the bar itself.
        min_interval: seconds between redraws (`update` with ``force`` redraws at once).
    """

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 24, min_interval: float = 0.2) -> None:
        self.total = max(int(total), 1)
        self.stream = stream if stream is not None else sys.stderr
        self.width, self.min_interval = width, min_interval
        self._last_draw = -math.inf
        self._last_len = 0

    def render(self, done: int, fields: dict[str, str]) -> str:
        """The bar's text for ``done`` of `total` with the ``fields`` after it."""
        frac = min(max(done / self.total, 0.0), 1.0)
        filled = int(frac * self.width)
        bar = "=" * filled + (">" if filled < self.width else "") + " " * max(self.width - filled - 1, 0)
        text = f"[{bar}] {done:,}/{self.total:,} steps {100 * frac:3.0f}%"
        return text + "".join(f"  {k} {v}" for k, v in fields.items())

    def update(self, done: int, fields: dict[str, str], force: bool = False) -> None:
        """Redraws the bar (if ``min_interval`` has passed since the last redraw, or ``force``)."""
        now = time.perf_counter()
        if not force and now - self._last_draw < self.min_interval:
            return
        self._last_draw = now
        text = self.render(done, fields)
        self.stream.write("\r" + text + " " * max(self._last_len - len(text), 0))
        self.stream.flush()
        self._last_len = len(text)

    def close(self) -> None:
        """Ends the line (the bar stays visible)."""
        if self._last_len:
            self.stream.write("\n")
            self.stream.flush()
            self._last_len = 0
