"""Framework overhead measured (issue 18): act, update, sampling and start-up against hand-written code, in one run.

`measure` returns every figure of the ``overhead`` scenario of ``spacegraph report``:

- act: framework/hand calls/s of the dueling Nature-DQN actor (`act_measure.measure`,
  interleaved rounds, median of the per-round CPU-time ratios) at batch 1, 4, 16, 64;
- update: hand/framework time of one DQN update at batch 32, CartPole's MLP and Pong's Nature CNN
  (`update_overhead`, interleaved rounds, median of the CPU-time rates);
- sampling: frames/CPU-s of our worker acting (not observing) over the same vector environment stepped
  by a hand-written loop calling the same Q-network (`sampling_overhead`, interleaved rounds, median of
  the per-round CPU-time ratios), CartPole and Pong at 1, 4 and 16 environments; the worker observing
  too is shown beside it, and the worker acting through the hand-written act of the loop (its own cost
  without the framework's act); on PyTorch, also the worker acting through an agent whose ``act`` is
  traced (``execution.trace: [act]``, own rows) and one whose methods run step by step
  (``execution.replay: false``, own rows: the default replays them);
- start-up: seconds to the first progress line of ``spacegraph train dqn_cartpole``
  (`startup_time`), the median of ``STARTUP_PAIRS`` fresh processes per repeat, each paired with a
  fresh process importing the framework alone (`import_seconds`, taken right before or after it);
  the per-pair differences give the framework's own start-up, after the import.

Each act/update measurement is repeated ``repeats`` times to show the spread; the load
average at start and end is recorded (the machine is shared).
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

TARGETS = {"act": 0.95, "update": 0.9, "sampling": 0.85, "startup_s": 3.0}
#: The sampling comparison's points: config and numbers of environments.
SAMPLING_POINTS = {"cartpole": (1, 4, 16), "pong": (1, 4, 16)}
#: Start-up and import-alone pairs per repeat (`measure`): the start-up rows are medians over all pairs.
STARTUP_PAIRS = 3
#: The update's networks (`update_overhead.CONFIGS`) with their row labels.
UPDATE_NETWORKS = {"cartpole": "CartPole MLP", "nature": "Nature CNN (Pong frames)"}


def measure(backends: tuple[str, ...] = ("tf", "torch"), repeats: int = 2, seconds: float = 2.0,
            batch_sizes: tuple[int, ...] = (1, 4, 16, 64), sampling_points: dict | None = None) -> dict[str, Any]:
    """All figures of the report (see the module docstring)."""
    from spacegraph.reports import act_measure, sampling_overhead, update_overhead
    from harness.measure.machine import uncommitted
    from spacegraph.reports.startup_time import first_progress_seconds

    load0, t0 = os.getloadavg(), time.perf_counter()
    act: dict[str, dict[int, list[float]]] = {b: {n: [] for n in batch_sizes} for b in backends}
    update: dict[str, dict[str, list[float]]] = {n: {b: [] for b in backends} for n in UPDATE_NETWORKS}
    startup: dict[str, list[float]] = {b: [] for b in backends}
    points = SAMPLING_POINTS if sampling_points is None else sampling_points
    sampling: dict[str, dict[str, dict[str, list[float]]]] = {
        f"{config}-{n}": {b: {"act": [], "observing": [], "hand_act": [], "traced_act": [],
                                 "eager_act": []} for b in backends}
        for config, ns in points.items() for n in ns}
    imports: dict[str, list[float]] = {b: [] for b in backends}
    imports_plain: dict[str, list[float]] = {b: [] for b in backends if b == "tf"}
    for _ in range(repeats):
        result = act_measure.measure(backends, batch_sizes, seconds=seconds, rounds=6)
        for row in result["rows"]:
            act[row["backend"]][row["batch"]].append(row["ratio"])
        for network in UPDATE_NETWORKS:
            for b in backends:
                update[network][b].append(update_overhead.measure(b, 32, seconds=seconds, rounds=6,
                                                                  network=network)["ratio"])
        for config, ns in points.items():
            for n in ns:
                for b in backends:
                    point = sampling_overhead.measure(b, config, n, seconds=seconds, rounds=4)
                    sampling[f"{config}-{n}"][b]["act"].append(point["worker_act_over_direct"])
                    sampling[f"{config}-{n}"][b]["observing"].append(point["worker_over_direct"])
                    sampling[f"{config}-{n}"][b]["hand_act"].append(point["worker_hand_over_direct"])
                    if point["worker_traced_over_direct"] is not None:  # PyTorch only
                        sampling[f"{config}-{n}"][b]["traced_act"].append(point["worker_traced_over_direct"])
                    if point.get("worker_eager_over_direct") is not None:  # PyTorch only
                        sampling[f"{config}-{n}"][b]["eager_act"].append(point["worker_eager_over_direct"])
        for b in backends:
            # start-up and the import alone in pairs, taken one right after the other (in turn first), so that
            # each pair's difference, the framework's own start-up, sees the host at about one speed
            for i in range(STARTUP_PAIRS):
                if i % 2:
                    imports[b].append(import_seconds(b))
                    startup[b].append(first_progress_seconds(b))
                else:
                    startup[b].append(first_progress_seconds(b))
                    imports[b].append(import_seconds(b))
            if b in imports_plain:
                imports_plain[b].append(import_seconds(b, plain=True))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = uncommitted(["harness", "reference_agents", "spacegraph"])
    from harness.measure import host

    return {"machine": host.describe(host.facts()), "act": act, "update": update, "sampling": sampling,
            "startup": startup, "imports": imports,
            "imports_plain": imports_plain, "targets": TARGETS,
            "repeats": repeats, "seconds": seconds, "commit": commit, "uncommitted": dirty, "load_before": load0,
            "load_after": os.getloadavg(),
            "minutes": (time.perf_counter() - t0) / 60}


#: The framework import as spacegraph does it (TensorFlow without its eager Keras import), and plainly.
_IMPORTS = {"tf": "from harness.backends.tf_import import import_tensorflow; import_tensorflow()",
            "torch": "import torch"}
_PLAIN_IMPORTS = {"tf": "import tensorflow", "torch": "import torch"}


def import_seconds(backend: str, plain: bool = False) -> float:
    """Seconds a fresh interpreter takes to import the backend's framework alone (the floor of start-up).

    TensorFlow is imported as spacegraph imports it (`harness.backends.tf_import.import_tensorflow`),
    or with a plain ``import tensorflow`` when ``plain``. The time is taken when the child says the import
    is done (`startup_time.seconds_until_output`), as start-up is taken at the first progress line: the
    interpreter's exit after it (TensorFlow's teardown, 0.1-0.5 s here) is not counted on either side.

    Raises:
        RuntimeError: when the child ends before its import is done (with its stderr).
    """
    import sys

    from spacegraph.reports.startup_time import seconds_until_output

    code = (_PLAIN_IMPORTS if plain else _IMPORTS)[backend]
    said = "; import sys; print('spacegraph: imported', file=sys.stderr, flush=True)"
    return seconds_until_output([sys.executable, "-c", code + said], b"spacegraph: imported",
                                f"import_seconds({backend!r}): {code!r} did not finish its import",
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
