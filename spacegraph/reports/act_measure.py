"""Act throughput measured (RLgraph Fig. 5b): framework and hand-written actors timed in interleaved rounds.

The workload is `spacegraph.reports.act_throughput`'s: a Nature-DQN torso with a dueling
head, ``q_values(float32[B,84,84,4]) -> float32[B,6]``, called through the framework
(``executor.api_function``) and through a hand-written actor on the same backend with
the same weights. Every pair is checked to agree before it is timed.

Timing: per batch size, the contenders are timed in interleaved rounds
(`harness.measure.timing.interleaved_rates`) on the process's CPU time and on the wall
clock. The headline ratio is the median over rounds of framework / hand-written in the
same round, on CPU time (`_pair_stats`).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import numpy as np

from harness.measure.machine import configure_threads, environment
from harness.measure.timing import CLOCKS, interleaved_rates
from spacegraph.reports.act_diagnosis import diagnose_torch_layout, op_counts
from spacegraph.reports.act_throughput import BACKENDS, BATCH_SIZES, NUM_ACTIONS, STATE_SPACE, build, setup_pair

#: The issue's target: framework / hand-written at least this at every batch size.
TARGET_RATIO = 0.95



def _pair_stats(fw: dict[str, list[float]], hand: dict[str, list[float]]) -> dict[str, Any]:
    """Per clock: best-round rates, their ratio and the per-round ratios' median, min and max.

    The headline ``ratio`` is the median of the per-round CPU-time ratios.
    """
    out: dict[str, Any] = {}
    for clock in CLOCKS:
        per_round = [f / h for f, h in zip(fw[clock], hand[clock])]
        out[clock] = {"framework_calls_per_s": max(fw[clock]), "hand_calls_per_s": max(hand[clock]),
                      "ratio": max(fw[clock]) / max(hand[clock]),
                      "ratio_median_of_rounds": statistics.median(per_round),
                      "ratio_min_of_rounds": min(per_round), "ratio_max_of_rounds": max(per_round)}
    out["ratio"] = out["cpu"]["ratio_median_of_rounds"]
    return out


def measure(backends: tuple[str, ...] = BACKENDS, batch_sizes: tuple[int, ...] = BATCH_SIZES,
            seconds: float = 3.0, rounds: int = 10, threads: int = 1, diagnose: bool = False) -> dict[str, Any]:
    """Framework and hand-written calls/s and their ratio for every backend and batch size, in one run.

    Args:
        backends: backends to measure ("tf", "torch").
        batch_sizes: batch sizes to measure.
        seconds: wall-clock time per contender per batch size (split into ``rounds``).
        rounds: interleaved rounds per batch size.
        threads: CPU threads per framework (see `configure_threads`); 1 by default, as the paper's
            single-threaded worker, and because on a shared machine more threads than free cores
            make PyTorch's thread pool stall.
        diagnose: also time the PyTorch layout variants (`diagnose_torch_layout`; needs "torch") and
            count the ops one call runs on every backend (`op_counts`).

    Returns:
        ``{"config", "environment", "rows": [{"backend", "batch", "ratio", "cpu": {...}, "wall": {...},
        "max_abs_diff"}], "diagnosis": {...} | None}``: per clock (`CLOCKS`) ``framework_calls_per_s``,
        ``hand_calls_per_s`` (best rounds), ``ratio`` (framework / hand of the best rounds) and the
        median, min and max of the per-round ratios; the row's ``ratio`` is the median of the
        per-round CPU-time ratios.

    Raises:
        ValueError: for an unknown backend or a batch size that is not a positive int.
        AssertionError: when a hand-written actor's Q-values differ from the framework's.
    """
    for backend in backends:
        if backend not in BACKENDS:
            raise ValueError(f"act_measure.measure: backends must be among {BACKENDS}; got {backend!r}")
    for batch in batch_sizes:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"act_measure.measure: batch_sizes must be positive ints; got {batch!r}")
    if diagnose and "torch" not in backends:
        raise ValueError(f"act_measure.measure: diagnose=True needs 'torch' in backends; got {backends}")
    thread_settings = configure_threads(threads)
    load_before = os.getloadavg()
    started = time.perf_counter()
    rows = []
    for backend in backends:
        executor = build(backend)
        for batch in batch_sizes:
            framework, hand, states = setup_pair(backend, batch, executor)
            diff = float(np.max(np.abs(executor.backend.to_numpy(framework(states)) - np.asarray(hand(states)))))
            rates = interleaved_rates({"framework": lambda: framework(states), "hand": lambda: hand(states)},
                                      seconds, rounds)
            rows.append({"backend": backend, "batch": batch, **_pair_stats(rates["framework"], rates["hand"]),
                         "max_abs_diff": diff})
    diagnosis = None
    if diagnose:
        diagnosis = diagnose_torch_layout(batch_sizes, seconds, rounds)
        diagnosis["op_counts"] = {backend: op_counts(backend) for backend in backends}
    return {
        "config": {"state_space": STATE_SPACE, "num_actions": NUM_ACTIONS, "backends": list(backends),
                   "batch_sizes": list(batch_sizes), "seconds": seconds, "rounds": rounds, "threads": thread_settings,
                   "target_ratio": TARGET_RATIO},
        "environment": environment(load_before, time.perf_counter() - started),
        "rows": rows, "diagnosis": diagnosis,
    }
