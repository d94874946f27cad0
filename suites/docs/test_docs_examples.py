"""The examples of the tutorials (docs/tutorials/*.md) and of README.md, run as written.

Each page is followed in an empty folder: its file blocks (a first line ``# PATH``) are written there,
its Python blocks run in order in one interpreter (a block that shows an exception runs alone and must
fail with exactly the line it shows), and its shell blocks marked ``<!-- docs-test: run -->`` run their
``spacegraph``/``pytest`` lines with the step counts divided by 50 (``<!-- docs-test: distributed -->``:
only under ``-m distributed``, through `spacegraph.cli.main` in this process, so that the listener watch
knows the TensorFlow servers they start). Every ``spacegraph`` command line anywhere in README.md and docs/ is
checked against that command's ``--help``: the command exists and takes every flag shown. The
conventions are in `suites/docs/docs_blocks.py`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from suites.docs.docs_blocks import (ROOT, SHELL, Block, blocks, command_and_flags, documentation_pages,
                                     interpreter_argv, scaled, shell_lines, tutorial_pages, words)

TIMEOUT_S = 300


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env.update(SPACEGRAPH_BACKENDS="torch", OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1",
               TF_NUM_INTEROP_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg")
    return env


def _run(cwd: Path, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)


def _project(tmp_path: Path, page: Path) -> Path:
    """An empty folder holding the page's file blocks."""
    project = tmp_path / "project"
    project.mkdir()
    for block in blocks(page):
        if block.file_path:
            path = project / block.file_path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.code, encoding="utf-8")
    return project


def _ids(pages: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in pages]


def _python_blocks(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang == "python" and not b.file_path]


def _shell_blocks(page: Path, mark: str) -> list[Block]:
    return [b for b in blocks(page) if b.lang in SHELL and b.mark == mark]


def run_python_blocks(page: Path, tmp_path: Path) -> None:
    """Run the page's Python blocks in a folder holding its files; fail naming the block that failed."""
    project = _project(tmp_path, page)
    plain = [b for b in _python_blocks(page) if b.expected_error is None]
    if plain:
        script = project / "docs_example.py"
        script.write_text("\n\n".join(f"# --- {b.where}\n{b.code}" for b in plain), encoding="utf-8")
        proc = _run(project, [sys.executable, script.name])
        assert proc.returncode == 0, (f"the Python blocks of {page.relative_to(ROOT)} "
                                      f"({', '.join(b.where for b in plain)}) failed:\n{proc.stderr[-4000:]}")
    for block in (b for b in _python_blocks(page) if b.expected_error is not None):
        code = "\n".join(line for line in block.code.splitlines() if not line.startswith("#"))
        proc = _run(project, [sys.executable, "-c", code])
        got = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        assert proc.returncode == 1 and " ".join(got.split()) == " ".join(block.expected_error.split()), (
            f"{block.where} shows\n  {block.expected_error}\nbut the block exited {proc.returncode} with\n  {got}")


def _in_process(cwd: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """``spacegraph ARGS`` through `spacegraph.cli.main` in this process (so the listener watch of distributed
    tests knows the TensorFlow servers it starts, as for the CLI's own tests)."""
    from spacegraph.cli import main

    assert argv[0] == "spacegraph", f"only spacegraph commands run in this process; got {argv!r}"
    monkeypatch.chdir(cwd)
    try:
        return main(argv[1:]) or 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


def run_shell_blocks(page: Path, tmp_path: Path, mark: str, monkeypatch: pytest.MonkeyPatch | None = None) -> int:
    """Run the page's shell blocks marked ``mark`` (in this process when ``monkeypatch`` is given, else each
    command in a subprocess); returns how many commands ran."""
    project = _project(tmp_path, page)
    cwd, ran = project, 0
    for block in _shell_blocks(page, mark):
        for line in shell_lines(block.code):
            for part in line.split("&&"):
                argv = words(part)
                if not argv:
                    continue
                if argv[0] == "cd":
                    cwd = (cwd / argv[1]).resolve()
                    continue
                ran += 1
                if monkeypatch is not None:
                    code = _in_process(cwd, scaled(argv), monkeypatch)
                    assert code == 0, f"{block.where}: `{part.strip()}` (steps / 50) exited {code}"
                    continue
                proc = _run(cwd, interpreter_argv(scaled(argv)))
                assert proc.returncode == 0, (f"{block.where}: `{part.strip()}` (steps / 50) exited "
                                              f"{proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return ran


PYTHON_PAGES = [p for p in tutorial_pages() if _python_blocks(p)]
RUN_PAGES = [p for p in tutorial_pages() if _shell_blocks(p, "run")]
DISTRIBUTED_PAGES = [p for p in tutorial_pages() if _shell_blocks(p, "distributed")]


def test_the_pages_have_examples_to_run() -> None:
    names = set(_ids(PYTHON_PAGES)) | set(_ids(RUN_PAGES))
    assert {"README.md", "docs/tutorials/getting_started.md", "docs/tutorials/training.md",
            "docs/tutorials/own_component.md"} <= names
    assert "README.md" in _ids(DISTRIBUTED_PAGES) and "docs/tutorials/distributed.md" in _ids(DISTRIBUTED_PAGES)


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=_ids(PYTHON_PAGES))
def test_python_blocks_run(page: Path, tmp_path: Path) -> None:
    run_python_blocks(page, tmp_path)


@pytest.mark.parametrize("page", RUN_PAGES, ids=_ids(RUN_PAGES))
def test_marked_commands_run(page: Path, tmp_path: Path) -> None:
    assert run_shell_blocks(page, tmp_path, "run") > 0


@pytest.mark.distributed
@pytest.mark.parametrize("page", DISTRIBUTED_PAGES, ids=_ids(DISTRIBUTED_PAGES))
def test_marked_distributed_commands_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_shell_blocks(page, tmp_path, "distributed", monkeypatch) > 0


_HELP = """
import contextlib, io, json, sys
from spacegraph.cli import main
texts = {}
for command in json.loads(sys.argv[1]):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main([*command, "--help"])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    texts[" ".join(command)] = out.getvalue() if code == 0 else None
print(json.dumps(texts))
"""


def spacegraph_commands() -> list[tuple[str, tuple[str, ...], list[str]]]:
    """``(where, command, flags)`` of every spacegraph command line in a shell block of the documentation."""
    found = []
    for page in documentation_pages():
        for block in blocks(page):
            if block.lang not in SHELL:
                continue
            for line in shell_lines(block.code):
                for part in line.split("&&"):
                    argv = words(part)
                    if argv and argv[0] == "spacegraph":
                        found.append((block.where, *command_and_flags(argv)))
    return found


def test_every_documented_command_and_flag_exists() -> None:
    commands = spacegraph_commands()
    assert len(commands) > 20
    wanted = sorted({command for _, command, _ in commands if command})
    proc = subprocess.run([sys.executable, "-c", _HELP, json.dumps(wanted)], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    helps = json.loads(proc.stdout.strip().splitlines()[-1])
    problems = []
    for where, command, flags in commands:
        text = helps.get(" ".join(command))
        if not command or text is None:
            problems.append(f"{where}: `spacegraph {' '.join(command)}` is no command")
            continue
        problems += [f"{where}: `spacegraph {' '.join(command)}` has no flag {flag}"
                     for flag in flags if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text)]
    assert not problems, "\n".join(problems)


def test_every_documented_python_module_command_exists() -> None:
    """``python -m MODULE`` anywhere in README.md or docs/ (blocks and text) names a runnable module of this tree."""
    found = {}
    for page in documentation_pages():
        for match in re.finditer(r"python3? -m ((?:harness|reference_agents|spacegraph)(?:\.\w+)+)", page.read_text()):
            found.setdefault(match.group(1), f"{page.relative_to(ROOT)}")
    assert found, "no python -m command found: the pattern no longer matches the pages"
    missing = [f"{where}: python -m {module}" for module, where in sorted(found.items()) if not _runnable(module)]
    assert not missing, "modules that do not exist or have no command line:\n" + "\n".join(missing)


def _runnable(module: str) -> bool:
    """Whether ``python -m module`` runs something: a package with __main__, or a module with a main guard."""
    path = ROOT / module.replace(".", "/")
    if (path / "__main__.py").is_file():
        return True
    source = path.with_suffix(".py")
    return source.is_file() and re.search(r"^if __name__ == .__main__.:", source.read_text(), re.M) is not None


# Paths the pages name that are not in the repository on purpose: files of the reader's own project
# (docs/tutorials/own_component.md) and build outputs.
NOT_IN_THE_REPOSITORY = {"specs/components/my_layer.yaml", "specs/components/soft_clip.yaml", "asv_bench/html/",
                         "asv_bench/results/"}
_PATH_SPAN = re.compile(r"`((?:harness|reference_agents|spacegraph|suites|specs|examples|asv_bench|reports|docs)"
                        r"/[\w./-]*(?:\.\w+|/))`")


def test_every_repository_path_in_the_text_exists() -> None:
    """A repository path in inline code (`harness/...py`, `reports/.../report.md`) names a file or folder of
    this tree; the history page (docs/history/) keeps the paths of its time."""
    missing = []
    for page in documentation_pages():
        if "history" in page.relative_to(ROOT).parts:
            continue
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
        missing += [f"{page.relative_to(ROOT)}: {path}" for path in _PATH_SPAN.findall(text)
                    if path not in NOT_IN_THE_REPOSITORY and not (ROOT / path).exists()]
    assert not missing, "paths that do not exist:\n" + "\n".join(sorted(set(missing)))
