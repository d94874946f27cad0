"""`BadFileError`: a file that cannot be used, named with what is wrong with it (every reader of saved files raises
it: `harness.execution.serialization`, `harness.execution.formats`)."""

from __future__ import annotations

import os
from typing import Any


class BadFileError(ValueError):
    """A file that cannot be used: missing, empty, truncated, corrupted, or not the kind of file expected.

    The message is ``"[<context>: ]<path> <problem>"``, e.g. ``"run/checkpoint/agent_state.npz is damaged:
    truncated, corrupted or not an .npz archive (BadZipFile: File is not a zip file)"``.

    Attributes:
        path: the file.
        problem: what is wrong with it, phrased to follow the path (``"is empty (0 bytes)"``).
        context: who read it and for what (may be empty).
    """

    def __init__(self, path: str | os.PathLike, problem: str, context: str = "") -> None:
        self.path, self.problem, self.context = os.fspath(path), problem, context
        super().__init__(f"{context}: {self.path} {problem}" if context else f"{self.path} {problem}")

    def within(self, context: str) -> "BadFileError":
        """The same error with ``context`` put before the message (outermost first)."""
        return type(self)(self.path, self.problem, f"{context}: {self.context}" if self.context else context)

    def __reduce__(self) -> tuple[Any, ...]:  # (raised in a Ray actor, it travels by pickle)
        return type(self), (self.path, self.problem, self.context)


class FormatVersionError(BadFileError):
    """A whole file of a format version this code does not read (newer, or older than any migration reaches):
    no damage, so a reader that falls back from a damaged file to an older one (`--resume`) stops here."""
