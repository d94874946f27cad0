"""Sampling throughput measured (RLgraph Fig. 7a): every contender for every number of environments, in one run.

Timing: per N, the contenders are timed in interleaved rounds, each round giving each
contender about ``seconds / rounds`` of whole chunks; a chunk is a number of lockstep
steps chosen after a warm-up so that it lasts about ``chunk_seconds`` (so a per-call
overhead is amortised alike for every contender). Rounds are timed on the process's CPU
time and on the wall clock; a rate is the best round's, and the ratios use CPU time
(frames per CPU-second), which other processes competing for the cores do not lower.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from harness.measure.machine import configure_threads, environment, library_versions, repo_relative  # noqa: E402
from harness.measure.timing import interleaved, run_for  # noqa: E402
from spacegraph.reports import sampling_contenders as contenders_module  # noqa: E402
from spacegraph.reports.sampling_contenders import (  # noqa: E402
    BACKENDS, NUM_ENVS, PONG_CONFIG, SAMPLING_CAPACITY, RawContender, RLlibContender, WorkerContender,
    bare_factory, env_factory, load_config)


def calibrate_chunk(contender: Any, chunk_seconds: float, warmup_seconds: float) -> int:
    """Env steps per chunk (a multiple of N) lasting about ``chunk_seconds``, after a warm-up of ``warmup_seconds``."""
    n = contender.num_envs
    steps, _, wall, _ = run_for(lambda: contender.chunk(n), warmup_seconds)
    per_step = wall / max(steps, 1)
    lockstep = max(1, int(chunk_seconds / (per_step * n)))
    return lockstep * n


def time_contenders(contenders: dict[str, Any], seconds: float, rounds: int, chunk_seconds: float,
                    warmup_seconds: float) -> dict[str, dict[str, Any]]:
    """Interleaved rounds over ``contenders``: per contender its frames per CPU-second and per second, and totals.

    Each round is timed on the process's CPU time (``time.process_time``: the work done,
    insensitive to other processes competing for the cores) and on the wall clock.

    Returns:
        ``{name: {"frames_per_cpu_s" (best round), "frames_per_cpu_s_median", "frames_per_cpu_s_rounds" (each
        round's, in round order: round ``r`` of every contender ran within the same pass over them),
        "frames_per_s" (wall clock, best round), "frames_per_s_median", "steps", "frames", "seconds",
        "cpu_seconds", "chunk_steps", "frames_per_step"}}``, plus ``"breakdown"`` (CPU-time shares) for
        contenders that account for their time (`WorkerContender`).
    """
    chunks = {name: calibrate_chunk(c, chunk_seconds, warmup_seconds) for name, c in contenders.items()}
    for contender in contenders.values():
        if hasattr(contender, "reset_breakdown"):
            contender.reset_breakdown()
    per_round: dict[str, dict[str, list[float]]] = {name: {"cpu": [], "wall": []} for name in contenders}
    totals = {name: [0, 0, 0.0, 0.0] for name in contenders}
    names = list(contenders)
    for name in interleaved(names, rounds):
        contender, steps_per_chunk = contenders[name], chunks[name]
        steps, frames, wall, cpu = run_for(lambda: contender.chunk(steps_per_chunk), seconds / rounds)
        per_round[name]["cpu"].append(frames / cpu)
        per_round[name]["wall"].append(frames / wall)
        for i, value in enumerate((steps, frames, wall, cpu)):
            totals[name][i] += value
    out = {name: {"frames_per_cpu_s": max(per_round[name]["cpu"]),
                  "frames_per_cpu_s_median": statistics.median(per_round[name]["cpu"]),
                  "frames_per_cpu_s_rounds": list(per_round[name]["cpu"]),
                  "frames_per_s": max(per_round[name]["wall"]),
                  "frames_per_s_median": statistics.median(per_round[name]["wall"]),
                  "steps": totals[name][0], "frames": totals[name][1], "seconds": totals[name][2],
                  "cpu_seconds": totals[name][3], "chunk_steps": chunks[name],
                  "frames_per_step": contenders[name].frames_per_step}
           for name in names}
    for name in names:
        if hasattr(contenders[name], "breakdown"):
            out[name]["breakdown"] = contenders[name].breakdown(totals[name][3])
    return out


# ---- the measurement --------------------------------------------------------------------------------
def measure(config: str | os.PathLike | dict[str, Any] = PONG_CONFIG, backends: tuple[str, ...] = BACKENDS,
            num_envs: tuple[int, ...] = NUM_ENVS, seconds: float = 8.0, rounds: int = 4,
            chunk_seconds: float = 0.25, warmup_seconds: float = 1.0, rllib: bool = True, raw_ale: bool = True,
            capacity: int | None = SAMPLING_CAPACITY, threads: int = 1, seed: int = 0) -> dict[str, Any]:
    """Frames/s of every contender for every N in one run (see the module docstring).

    Args:
        config: the agent config (file or dict); its ``env`` is the environment measured.
        backends: our backends ("tf", "torch").
        num_envs: the vector sizes N.
        seconds: time per contender per N, split into ``rounds`` interleaved rounds.
        rounds: interleaved rounds per N.
        chunk_seconds: about how long one timed chunk of steps lasts.
        warmup_seconds: untimed stepping per contender per N before timing (also calibrates the chunk).
        rllib: include RLlib (Atari configs only; skipped with a note when ``ray[rllib]`` is not installed).
        raw_ale: include the bare environment (``raw_ale``) besides the agent's (``raw_env``); only
            meaningful where the config wraps its environment (``atari: true``).
        capacity: replay capacity of our agents (None: the config's).
        threads: CPU threads per framework.
        seed: agents' and environments' seed.

    Returns:
        ``{"config", "environment", "versions", "rows": [{"num_envs", <contender>: {...}, "ratios": {...},
        "wall_ratios": {...}}], "rllib_note", "rllib_model"}``; ratios are ``ours_<backend>/raw_env`` and
        ``ours_<backend>/rllib`` (None without RLlib) of the best rounds' frames per CPU-second
        (``wall_ratios``: per wall-clock second); a contender's entry is `time_contenders`'.

    Raises:
        ValueError: for an unknown backend or a non-positive N.
    """
    from reference_agents.agents import DQNAgent

    for backend in backends:
        if backend not in BACKENDS:
            raise ValueError(f"sampling_measure.measure: backends must be among {BACKENDS}; got {backend!r}")
    for n in num_envs:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"sampling_measure.measure: num_envs must be positive ints; got {n!r}")
    cfg = load_config(config, capacity)
    threads_used = configure_threads(threads)
    load_before = os.getloadavg()
    started = time.perf_counter()
    make_agent_env = env_factory(cfg)
    atari = bool(cfg["env"].get("atari", False))
    if not rllib:
        rllib_note = "not requested"
    elif not atari:
        rllib_note = "RLlib is compared on Atari configs only (its Nature-CNN setup)"
    else:
        rllib_note = contenders_module.rllib_available()
    with_ale = raw_ale and atari
    agents = {b: DQNAgent(cfg, backend=b, seed=seed) for b in backends}
    rows, rllib_model = [], None
    for n in num_envs:
        contenders: dict[str, Any] = {}
        try:
            if with_ale:
                contenders["raw_ale"] = RawContender(bare_factory(cfg), n, seed)
            contenders["raw_env"] = RawContender(make_agent_env, n, seed)
            for backend, agent in agents.items():
                contenders[f"ours_{backend}"] = WorkerContender(agent, make_agent_env, n, seed)
            if rllib_note is None:
                contenders["rllib"] = RLlibContender(make_agent_env, n, seed, dueling=cfg["network"]["dueling"])
                rllib_model = contenders["rllib"].module_text
            row: dict[str, Any] = {"num_envs": n, **time_contenders(contenders, seconds, rounds, chunk_seconds,
                                                                     warmup_seconds)}
        finally:
            for c in contenders.values():
                c.close()
        for key, rate in (("ratios", "frames_per_cpu_s"), ("wall_ratios", "frames_per_s")):
            row[key] = {}
            for backend in backends:
                ours = row[f"ours_{backend}"][rate]
                row[key][f"ours_{backend}/raw_env"] = ours / row["raw_env"][rate]
                row[key][f"ours_{backend}/rllib"] = ours / row["rllib"][rate] if "rllib" in row else None
        rows.append(row)
    return {
        "config": {"agent_config": repo_relative(config) if not isinstance(config, dict) else "<dict>",
                   "env": cfg["env"], "network": cfg["network"], "preprocessing": cfg.get("preprocessing"),
                   "memory": cfg["memory"], "backends": list(backends), "num_envs": list(num_envs),
                   "seconds": seconds, "rounds": rounds, "chunk_seconds": chunk_seconds,
                   "warmup_seconds": warmup_seconds, "threads": threads_used, "seed": seed,
                   "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS")},
        "environment": environment(load_before, time.perf_counter() - started),
        "versions": versions(),
        "rows": rows, "rllib_note": rllib_note, "rllib_model": rllib_model,
    }


def versions() -> dict[str, str | None]:
    """gymnasium's, ale-py's and Ray's versions (None where not installed)."""
    return library_versions(("gymnasium", "ale_py", "ray"))
