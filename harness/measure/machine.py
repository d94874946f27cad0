"""The facts a measurement is recorded with: machine, CPU model, load, git revision, library versions, threads.

A report states where its numbers came from (`environment`); measurements that must not be
blurred by thread pools fighting over a few shared cores set the frameworks' pools first
(`configure_threads`).
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from harness.backends import get_threads, set_threads

#: The checkout this package lies in (where `git_revision` and `uncommitted` ask git by default).
REPO = Path(__file__).resolve().parents[2]


def repo_relative(path: str | os.PathLike, root: str | os.PathLike = REPO) -> str:
    """``path`` relative to ``root`` (the checkout) when it lies inside it, else as given: results name files
    without local paths."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except (ValueError, OSError):
        return os.fspath(path)


def configure_threads(threads: int) -> dict[str, int | None]:
    """Limits TensorFlow's and PyTorch's CPU thread pools to ``threads`` each, where still possible.

    TensorFlow accepts the setting only before its runtime starts; when it has already
    started, its current setting is kept and reported.

    Args:
        threads: threads per framework (intra-op; TensorFlow's inter-op pool too).

    Returns:
        ``{"torch": n, "tf_intra_op": n, "tf_inter_op": n}``; 0 for TensorFlow means its default
        (all cores); None where the framework is not installed.

    Raises:
        ValueError: when ``threads`` is not a positive int.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"configure_threads: threads must be a positive int; got {threads!r}")
    out: dict[str, int | None] = {"torch": None, "tf_intra_op": None, "tf_inter_op": None}
    try:
        set_threads("torch", threads, inter_op=False)
        out["torch"] = get_threads("torch")["intra_op"]
    except ImportError:
        pass
    try:
        set_threads("tf", threads)  # keeps what a started runtime has
        tf_threads = get_threads("tf")
    except ImportError:
        return out
    out["tf_intra_op"], out["tf_inter_op"] = tf_threads["intra_op"], tf_threads["inter_op"]
    return out


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else ``platform.processor()``, else ``"unknown"``."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_revision(root: str | os.PathLike = REPO) -> str:
    """The checkout's commit (with ``+dirty`` when tracked files differ from it), or 'unknown'."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def uncommitted(paths: Sequence[str], root: str | os.PathLike = REPO) -> list[str] | None:
    """``git status --porcelain`` lines under ``paths`` (the code a measurement ran may differ from the
    recorded revision there); None when git is unavailable."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=root, capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [line for line in out.splitlines() if line.strip()]


def library_versions(modules: Sequence[str]) -> dict[str, str | None]:
    """``{module: its __version__}`` for each module, None where it is not installed (imports them)."""
    out: dict[str, str | None] = {}
    for module in modules:
        try:
            out[module] = __import__(module).__version__
        except ImportError:
            out[module] = None
    return out


def environment(load_before: tuple[float, float, float], seconds: float) -> dict[str, Any]:
    """Machine, versions, date, revision and the load averages around a measurement of ``seconds``.

    Args:
        load_before: ``os.getloadavg()`` taken when the measurement started.
        seconds: how long the measurement took.

    Returns:
        ``{"date", "git_revision", "machine", "processor", "python", "numpy", "load_average_before",
        "load_average_after", "measurement_seconds", "tensorflow", "torch"}`` (the frameworks' versions
        None where not installed).
    """
    out: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_revision": git_revision(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, {platform.system()} {platform.release()}",
        "processor": cpu_model(),
        "python": platform.python_version(), "numpy": np.__version__,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "measurement_seconds": round(seconds, 1),
    }
    out.update(library_versions(("tensorflow", "torch")))
    return out
