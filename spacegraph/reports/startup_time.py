"""Start-up time: seconds from launching ``spacegraph train dqn_cartpole`` to its first progress line.

The command is started as a subprocess (a fresh interpreter: imports, config, the
agent's build and the first environment step all count) with ``--progress`` so that
the progress bar is drawn although stderr is a pipe; the time is taken when the first
progress bar line (``\\r[``) arrives on stderr, and the process is then ended.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

CONFIG = "dqn_cartpole"


def spacegraph_command() -> list[str]:
    """The ``spacegraph`` console script next to this interpreter, else ``python -m spacegraph.cli``."""
    script = os.path.join(os.path.dirname(sys.executable), "spacegraph")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "spacegraph.cli"]


def seconds_until_output(cmd: list[str], marker: bytes, what: str, timeout: float = 120.0,
                         env: dict[str, str] | None = None) -> float:
    """Seconds from starting ``cmd`` until ``marker`` arrives on its stderr; the process is then ended.

    What the process does after the marker (its interpreter's exit among it) is not counted.

    Raises:
        RuntimeError: ``"{what} (exit N); stderr: ..."`` when the process ends, or ``timeout`` passes,
            before the marker came.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    seen = b""
    try:
        while time.perf_counter() - start < timeout:
            chunk = proc.stderr.read1(4096)
            if not chunk:
                break
            seen += chunk
            if marker in seen:
                return time.perf_counter() - start
        raise RuntimeError(f"{what} (exit {proc.poll()}); stderr: {seen.decode(errors='replace')[-2000:]}")
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stderr.close()


def first_progress_seconds(backend: str, timeout: float = 120.0, config: str = CONFIG) -> float:
    """Seconds until ``spacegraph train CONFIG --backend BACKEND`` draws its first progress line.

    Raises:
        RuntimeError: when the command ends, or ``timeout`` passes, before a progress line came
            (with what it wrote to stderr).
    """
    out = tempfile.mkdtemp(prefix="spacegraph-startup-")
    cmd = spacegraph_command() + ["train", config, "--backend", backend, "--steps", "100000", "--progress",
                                  "--out", os.path.join(out, "run"), "--eval-every", "100000"]
    try:
        return seconds_until_output(cmd, b"\r[", f"{' '.join(cmd)}: no progress line within {timeout:.0f} s",
                                    timeout, dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    finally:
        shutil.rmtree(out, ignore_errors=True)
