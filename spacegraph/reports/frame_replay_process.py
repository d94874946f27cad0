"""Child processes of the frame replay report: a whole Pong DQN process with a full replay, and build times.

Each runs in a fresh interpreter (so its peak resident memory and its build time are its own) and prints
one JSON line:

* ``peak``: builds ``build_agent(config, backend=...)`` (the host frame replay of ``dqn_pong``, optionally
  with ``memory.compression: lz4``), fills the replay with ``fill`` transitions recycled from a rollout of
  real Pong records (an ``.npz`` the parent wrote; batched ``HostFrameReplay.add``, as the agent's staged
  inserts are), samples and runs ``updates`` learning steps (``agent.update()``: sample, learn, write
  priorities), then reports the replay's bytes, its peak resident memory (``VmHWM``; ``ru_maxrss`` beside
  it, which Linux carries over from the parent that spawned it) and the times;
* ``build``: imports the backend and `reference_agents.agents` untimed, then times ``build_agent(config)``
  alone (wall clock and process CPU time).

Run ``python -m spacegraph.reports.frame_replay_process peak|build --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from harness.measure.host import rss_bytes  # noqa: E402
from harness.measure.machine import repo_relative  # noqa: E402


def _peak_rss_bytes() -> int:
    """The peak resident set of this process's own memory since it started: ``VmHWM`` of ``/proc/self/status``.

    Not ``ru_maxrss``: Linux keeps that across ``fork`` and ``exec``, so a child spawned by a parent
    holding G bytes reports at least G (the report's parent holds its stores and RLlib's).
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return _maxrss_bytes()


def _maxrss_bytes() -> int:
    """``resource.getrusage(RUSAGE_SELF).ru_maxrss`` in bytes (Linux reports KiB; inherited across exec)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _import_backend(backend: str) -> None:
    if backend == "tf":
        import tensorflow  # noqa: F401
    else:
        import torch  # noqa: F401


def peak(config: str, backend: str, compression: str | None, records_path: str, fill: int, chunk: int,
         updates: int) -> dict[str, Any]:
    """Builds the agent, fills its host frame replay with ``fill`` transitions, learns ``updates`` times."""
    import numpy as np

    _import_backend(backend)
    from reference_agents.agents import CONFIG_DIR, build_agent, load_config

    rss_start = rss_bytes()
    if not os.path.exists(config) and os.sep not in config and "." not in config:
        config = os.path.join(CONFIG_DIR, config + ".yaml")  # a bare name, as build_agent takes it
    cfg, _ = load_config(config, {"backend": backend})
    data = cfg.model_dump(by_alias=True, exclude_none=False)
    data["memory"]["compression"] = compression
    t0 = time.perf_counter()
    agent = build_agent(data, backend=backend)
    build_s = time.perf_counter() - t0
    store = agent.replay.store
    rss_built = rss_bytes()
    with np.load(records_path) as npz:
        records = {k: np.asarray(npz[k]) for k in npz.files}
    n = len(records["actions"])
    t0, c0 = time.perf_counter(), time.process_time()
    added = 0
    while added < fill:
        start = added % n
        take = min(chunk, fill - added, n - start)
        store.add({k: v[start:start + take] for k, v in records.items()})
        added += take
    fill_s, fill_cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_filled = rss_bytes()
    t0 = time.perf_counter()
    for _ in range(updates):
        agent.update()
    update_s = time.perf_counter() - t0
    return {"config": repo_relative(config), "backend": backend, "compression": compression, "fill": fill,
            "chunk": chunk,
            "capacity": store.capacity, "valid": store.size, "frames_written": store.index.frames_written,
            "replay_bytes": store.nbytes(), "frame_bytes": store.frame_nbytes(), "updates": updates,
            "build_s": round(build_s, 3), "fill_s": round(fill_s, 1), "fill_cpu_s": round(fill_cpu, 1),
            "update_s": round(update_s, 2), "rss_start": rss_start, "rss_built": rss_built,
            "rss_filled": rss_filled, "rss_end": rss_bytes(), "peak_rss": _peak_rss_bytes(),
            "ru_maxrss": _maxrss_bytes(),
            "load_average_end": [round(x, 2) for x in os.getloadavg()]}


def build(config: str, backend: str) -> dict[str, Any]:
    """``build_agent(config, backend)`` timed alone (imports done first, untimed)."""
    _import_backend(backend)
    from reference_agents.agents import build_agent

    load = os.getloadavg()
    t0, c0 = time.perf_counter(), time.process_time()
    agent = build_agent(config, backend=backend)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    del agent
    return {"config": config, "backend": backend, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "load_average_before": [round(x, 2) for x in load], "peak_rss": _peak_rss_bytes()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("peak", help="peak resident memory of a DQN process with a full host frame replay")
    p.add_argument("--config", default="dqn_pong")
    p.add_argument("--backend", default="torch")
    p.add_argument("--compression", default="none", choices=("none", "lz4"))
    p.add_argument("--records", required=True, help=".npz of records (states, actions, ... as RECORD_FIELDS)")
    p.add_argument("--fill", type=int, default=1_000_000)
    p.add_argument("--chunk", type=int, default=1024)
    p.add_argument("--updates", type=int, default=8)
    b = sub.add_parser("build", help="time build_agent alone")
    b.add_argument("--config", default="dqn_pong")
    b.add_argument("--backend", default="torch")
    args = parser.parse_args(argv)
    if args.what == "peak":
        out = peak(args.config, args.backend, None if args.compression == "none" else args.compression,
                   args.records, args.fill, args.chunk, args.updates)
    else:
        out = build(args.config, args.backend)
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
