"""README's "Write and test your own component", followed line by line in a temporary folder.

The file blocks (a first line ``# PATH``) are written into an empty project, the ``bash`` block's
commands run there in subprocesses (``pytest``/``spacegraph`` with this interpreter, torch only to
stay lean: `test_user_project` runs both backends), and the space-mismatch example must fail
with the very error the README prints.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
TITLE = "## Write and test your own component"


def section() -> str:
    text = README.read_text()
    assert TITLE in text, f"README.md has no section {TITLE!r}"
    body = text.split(TITLE, 1)[1]
    return body.split("\n## ", 1)[0]


def blocks() -> list[tuple[str, str]]:
    """``(language, code)`` of each fenced block of the section, in order."""
    return re.findall(r"^```(\w+)\n(.*?)^```", section(), re.M | re.S)


def run(project: Path, argv: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env.update(SPACEGRAPH_BACKENDS="torch", OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=240)


def command(line: str) -> list[str]:
    """A README command line as argv with this interpreter (``pytest`` and ``spacegraph`` as modules)."""
    words = shlex.split(line, comments=True)
    tool = {"pytest": ["-m", "pytest", "-p", "no:cacheprovider"], "spacegraph": ["-m", "spacegraph.cli"]}
    assert words and words[0] in tool, f"README command {line!r} starts with neither pytest nor spacegraph"
    return [sys.executable, *tool[words[0]], *words[1:]]


def test_the_section_has_files_commands_and_the_mismatch_example() -> None:
    kinds = [(lang, code.splitlines()[0]) for lang, code in blocks()]
    assert ("python", "# my_components/soft_clip.py") in kinds and ("yaml", "# specs/components/soft_clip.yaml") in kinds
    assert [lang for lang, _ in kinds].count("bash") == 1
    assert "check_input_spaces" in section() and "SpaceMismatchError" in section()


def test_followed_line_by_line(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    commands, snippets = [], []
    for lang, code in blocks():
        first = code.splitlines()[0]
        if lang == "bash":
            commands += [line for line in code.splitlines() if line.strip()]
        elif re.fullmatch(r"# [\w./-]+\.(py|toml|yaml)", first):
            path = project / first[2:]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code)
        else:
            snippets.append(code)
    assert len(commands) == 4 and len(snippets) == 1
    for line in commands:
        proc = run(project, command(line))
        # pytest exits 5 when it collects nothing: 0 means the spec checks ran and passed
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    (snippet,) = snippets
    code = "\n".join(line for line in snippet.splitlines() if not line.startswith("#"))
    proc = run(project, [sys.executable, "-c", code])
    assert proc.returncode == 1
    shown = " ".join(line.lstrip("# ").strip() for line in snippet.splitlines() if line.startswith("# "))
    got = proc.stderr.strip().splitlines()[-1]
    assert " ".join(got.split()) == " ".join(shown.split()), proc.stderr[-2000:]
