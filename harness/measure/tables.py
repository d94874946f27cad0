"""Markdown tables for reports: a header row, the ``|---|`` rule and one line per row."""

from __future__ import annotations

from typing import Any, Iterable, Sequence


def markdown_row(cells: Sequence[Any]) -> str:
    """``| a | b | c |`` (cells as ``str()`` gives them)."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_table(header: Sequence[Any], rows: Iterable[Sequence[Any] | str]) -> str:
    """A Markdown table: the header, a ``---`` rule per column, then the rows.

    Args:
        header: the column titles.
        rows: each a sequence of cells, or a ready line (kept as it is, e.g. a row that spans
            several columns with empty cells).

    Returns:
        The lines joined with newlines (no trailing newline).
    """
    lines = [markdown_row(header), "|" + "---|" * len(header)]
    lines += [row if isinstance(row, str) else markdown_row(row) for row in rows]
    return "\n".join(lines)
