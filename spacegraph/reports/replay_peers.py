"""Prioritized replay against a peer: our `PrioritizedReplay` beside RLlib's `PrioritizedReplayBuffer`.

One workload for every contender: a memory of ``capacity`` records (filled before
timing, so inserts overwrite the oldest), records of ``state float32[4], action
int64, reward float32, terminal bool``, the same ``alpha``/``beta``, and three
operations on batches of ``batch`` records:

* ``insert``: write a batch of new records (at the largest priority so far);
* ``sample``: draw a prioritized batch, with its slots and importance weights;
* ``update``: set new priorities for the slots just sampled (as a training step does);

plus ``step`` = the three in a row, which is what one training iteration costs.

Ours is timed through `GraphExecutor.execute` (NumPy in, NumPy out: the user-facing
path) and through `GraphExecutor.api_function` with backend tensors (no NumPy
conversion), per backend. RLlib's buffer is timed through its public methods
(``add(SampleBatch)``, ``sample(n, beta)``, ``update_priorities(idxes, priorities)``).

The figure is the ``replay`` scenario of ``spacegraph report`` (`spacegraph.report.scenarios.replay`), which
times these calls in interleaved rounds; asv's ``peers_replay.py`` times them too.
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from spacegraph.reports.rllib import import_rllib_safely  # noqa: E402

RECORD = "[B]{state: float32[4], action: int64[], reward: float32[], terminal: bool[]}"
OPERATIONS = ("insert", "sample", "update", "step")
FILL_CHUNK = 10_000


def records(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """A batch of ``n`` records as NumPy arrays keyed like `RECORD`."""
    return {"state": rng.standard_normal((n, 4)).astype(np.float32), "action": rng.integers(0, 4, n),
            "reward": rng.standard_normal(n).astype(np.float32), "terminal": rng.random(n) < 0.1}


def priorities(rng: np.random.Generator, n: int) -> np.ndarray:
    """Positive priorities, like absolute TD errors."""
    return (np.abs(rng.standard_normal(n)) + 1e-3).astype(np.float32)


# ---- ours ---------------------------------------------------------------------------------------
def build_ours(backend: str, capacity: int, alpha: float, beta: float, epsilon: float, seed: int = 0):
    """A `GraphExecutor` of `PrioritizedReplay` on ``backend``, filled with ``capacity`` records."""
    from harness.execution.executor import GraphExecutor
    from reference_agents.components.memories import PrioritizedReplay

    spaces = {"records": RECORD, "num_records": "int64[]", "indices": "int64[B]", "priorities": "float32[B]"}
    executor = GraphExecutor(PrioritizedReplay(capacity, alpha=alpha, beta=beta, epsilon=epsilon), spaces,
                             backend=backend, seed=seed)
    rng = np.random.default_rng(seed)
    for start in range(0, capacity, FILL_CHUNK):
        executor.execute("insert_records", records(rng, min(FILL_CHUNK, capacity - start)))
    return executor


def ours_calls(executor: Any, batch: int, seed: int = 1) -> dict[str, dict[str, Callable[[], Any]]]:
    """``{"execute": {op: fn}, "api_function": {op: fn}}`` for one filled executor."""
    rng = np.random.default_rng(seed)
    new, count, prios = records(rng, batch), np.int64(batch), priorities(rng, batch)
    execute = executor.execute
    _, slots, _ = execute("get_records", count)

    def step_execute() -> None:
        execute("insert_records", new)
        _, s, _ = execute("get_records", count)
        execute("update_records", s, prios)

    by_execute = {"insert": lambda: execute("insert_records", new),
                  "sample": lambda: execute("get_records", count),
                  "update": lambda: execute("update_records", slots, prios),
                  "step": step_execute}

    to_tensor = executor.backend.to_tensor
    insert_fn, get_fn, update_fn = (executor.api_function(m) for m in ("insert_records", "get_records",
                                                                        "update_records"))
    t_new = {k: to_tensor(v) for k, v in new.items()}
    t_count, t_prios, t_slots = to_tensor(count), to_tensor(prios), to_tensor(slots)

    def step_api() -> None:
        insert_fn(t_new)
        _, s, _ = get_fn(t_count)
        update_fn(s, t_prios)

    by_api = {"insert": lambda: insert_fn(t_new), "sample": lambda: get_fn(t_count),
              "update": lambda: update_fn(t_slots, t_prios), "step": step_api}
    return {"execute": by_execute, "api_function": by_api}


# ---- RLlib ---------------------------------------------------------------------------------------
def rllib_version() -> str | None:
    """RLlib's (Ray's) version, or None when ``ray.rllib`` cannot be imported."""
    import_rllib_safely()
    try:
        import ray
        import ray.rllib.utils.replay_buffers.prioritized_replay_buffer  # noqa: F401
    except ImportError:
        return None
    return ray.__version__


def build_rllib(capacity: int, alpha: float, seed: int = 0):
    """RLlib's `PrioritizedReplayBuffer` (timesteps as storage unit), filled with ``capacity`` records."""
    import_rllib_safely()
    from ray.rllib.policy.sample_batch import SampleBatch
    from ray.rllib.utils.replay_buffers.prioritized_replay_buffer import PrioritizedReplayBuffer

    buffer = PrioritizedReplayBuffer(capacity=capacity, storage_unit="timesteps", alpha=alpha)
    rng = np.random.default_rng(seed)
    for start in range(0, capacity, FILL_CHUNK):
        buffer.add(sample_batch(SampleBatch, records(rng, min(FILL_CHUNK, capacity - start))))
    return buffer


def sample_batch(cls: Any, rec: dict[str, np.ndarray]) -> Any:
    """Our record batch as an RLlib ``SampleBatch`` with RLlib's column names."""
    return cls({"obs": rec["state"], "actions": rec["action"], "rewards": rec["reward"],
                "terminateds": rec["terminal"]})


def rllib_calls(buffer: Any, batch: int, beta: float, seed: int = 1) -> dict[str, Callable[[], Any]]:
    """``{op: fn}`` for a filled RLlib buffer (the SampleBatch to add is built once, outside the timing)."""
    from ray.rllib.policy.sample_batch import SampleBatch

    random.seed(seed)  # RLlib draws masses with the `random` module
    rng = np.random.default_rng(seed)
    new, prios = sample_batch(SampleBatch, records(rng, batch)), priorities(rng, batch).astype(np.float64)
    slots = buffer.sample(batch, beta=beta)["batch_indexes"]

    def step() -> None:
        buffer.add(new)
        s = buffer.sample(batch, beta=beta)
        buffer.update_priorities(s["batch_indexes"], prios)

    return {"insert": lambda: buffer.add(new), "sample": lambda: buffer.sample(batch, beta=beta),
            "update": lambda: buffer.update_priorities(slots, prios), "step": step}
