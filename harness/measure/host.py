"""The machine a report ran on: CPU model, cores, memory, GPUs, and whether the load exceeded the cores.

Complements `harness.measure.machine` (revision, versions, per-measurement environment).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Any, Sequence

from harness.measure.machine import cpu_model


def rss_bytes() -> int:
    """This process's resident memory now (``/proc/self/statm``), in bytes; 0 where unavailable."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def available_bytes() -> int:
    """``MemAvailable`` of ``/proc/meminfo`` (memory the machine can still give without swapping); 0 where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def memory_bytes() -> int | None:
    """Total physical memory (``/proc/meminfo``, else ``sysconf``), None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def gpus() -> list[str]:
    """``["NAME, MEMORY"]`` per NVIDIA GPU that ``nvidia-smi`` lists; [] when there is none (or no nvidia-smi)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def facts() -> dict[str, Any]:
    """``{"cpu", "cores", "memory_gib", "gpus", "os", "python"}``."""
    mem = memory_bytes()
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "memory_gib": None if mem is None else round(mem / 2 ** 30, 1),
            "gpus": gpus(), "os": f"{platform.system()} {platform.release()} ({platform.machine()})",
            "python": platform.python_version()}


def describe(f: dict[str, Any]) -> str:
    """One line: ``CPU, N cores, M GiB, GPU: ... | no GPU, OS``."""
    gpu = "GPU: " + "; ".join(f["gpus"]) if f.get("gpus") else "no GPU"
    return f"{f['cpu']}, {f['cores']} cores, {f['memory_gib']} GiB, {gpu}, {f['os']}"


def load_warning(loads: Sequence[float], cores: int | None = None) -> str | None:
    """A sentence when the highest of ``loads`` (1-minute load averages) exceeds the core count, else None."""
    cores = cores or os.cpu_count() or 1
    peak = max(loads) if loads else 0.0
    if peak <= cores:
        return None
    return (f"the 1-minute load average reached {peak:.1f} on {cores} cores: other processes competed for the CPU, "
            f"so rates on the wall clock are lower than on an idle machine (ratios are taken in interleaved rounds)")
