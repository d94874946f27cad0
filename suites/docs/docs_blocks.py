"""Reading the fenced blocks of the documentation's Markdown pages, for the tests that run them.

Conventions the pages follow (docs/testing.md, "The documentation"):

- a block whose first line is ``# PATH`` (a relative file name ending in .py, .toml, .yaml, .yml, .json or
  .cfg) is a file of the reader's project: it is written there before anything runs;
- every other ``python`` block runs; the blocks of one page run in order in one interpreter, except a block
  ending in comment lines that show an exception (``# module.SomeError: message``), which runs on its own
  and must fail with exactly that last line;
- a ``bash`` block preceded by ``<!-- docs-test: run -->`` has its ``spacegraph``/``pytest``/``cd`` lines
  run in the project, with every ``--steps N`` divided by `STEPS_DIVISOR`; ``<!-- docs-test: distributed -->``
  does the same, only in the distributed test run;
- every ``spacegraph`` command line of any shell block is checked against that command's ``--help``.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
STEPS_DIVISOR = 50
SHELL = ("bash", "sh", "console", "shell")

_FENCE = re.compile(r"^(?:<!-- docs-test: (?P<mark>[\w-]+) -->\n)?```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```[ \t]*$",
                    re.M | re.S)
_FILE_LINE = re.compile(r"# ([\w.-]+/)*[\w.-]+\.(py|toml|yaml|yml|json|cfg)")
_ERROR_LINE = re.compile(r"# (?:[\w]+\.)*\w*(?:Error|Exception): ")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: Path
    line: int
    lang: str
    code: str
    mark: str | None

    @property
    def where(self) -> str:
        """``page:line`` of the block's opening fence, relative to the repository."""
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def file_path(self) -> str | None:
        """The project file this block is (its first line ``# PATH``), or None."""
        first = self.code.splitlines()[0] if self.code.strip() else ""
        return first[2:] if _FILE_LINE.fullmatch(first) else None

    @property
    def expected_error(self) -> str | None:
        """The exception line a python block shows in its trailing comments, or None."""
        lines = self.code.rstrip().splitlines()
        tail: list[str] = []
        while lines and lines[-1].startswith("#"):
            tail.insert(0, lines.pop())
        for i, line in enumerate(tail):
            if _ERROR_LINE.match(line):
                return " ".join(part.lstrip("# ").strip() for part in tail[i:])
        return None


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start("lang")) + 1
        found.append(Block(page, line, match.group("lang"), match.group("code"), match.group("mark")))
    return found


def tutorial_pages() -> list[Path]:
    """The pages whose examples run: every tutorial and README.md."""
    return sorted((DOCS / "tutorials").glob("*.md")) + [ROOT / "README.md"]


def documentation_pages() -> list[Path]:
    """README.md and every page of the site's own (docs/, without the committed reports it links)."""
    return [ROOT / "README.md"] + sorted(p for p in DOCS.rglob("*.md") if "reports" not in p.relative_to(DOCS).parts)


def shell_lines(code: str) -> list[str]:
    """The command lines of a shell block, continuation lines joined."""
    return [line.strip() for line in code.replace("\\\n", " ").splitlines() if line.strip()]


def words(line: str) -> list[str]:
    """A command line as words, its comment left out."""
    return shlex.split(line, comments=True)


def scaled(argv: list[str]) -> list[str]:
    """``argv`` with every ``--steps N`` divided by `STEPS_DIVISOR` (at least 1)."""
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word == "--steps" and out[i + 1].isdigit():
            out[i + 1] = str(max(1, int(out[i + 1]) // STEPS_DIVISOR))
    return out


def interpreter_argv(argv: list[str]) -> list[str]:
    """A documented ``spacegraph``/``pytest`` command as argv of this interpreter.

    Raises:
        ValueError: for any other program (a marked block may run only these and ``cd``).
    """
    tools = {"spacegraph": ["-m", "spacegraph.cli"], "pytest": ["-m", "pytest", "-p", "no:cacheprovider"]}
    if not argv or argv[0] not in tools:
        raise ValueError(f"a docs-test block runs spacegraph, pytest and cd only; got {argv!r}")
    return [sys.executable, *tools[argv[0]], *argv[1:]]


def command_and_flags(argv: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The sub-command (``("train",)``, ``("spec", "test")``) and the ``--flags`` of a spacegraph command."""
    rest = [w for w in argv[1:] if w != "--verbose"]
    nested = {"spec", "new", "checkpoint"}
    depth = 2 if rest and rest[0] in nested else 1
    command = tuple(rest[:depth])
    flags = [w.split("=", 1)[0] for w in rest[depth:] if w.startswith("--")]
    return command, flags
