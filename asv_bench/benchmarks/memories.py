"""Insert and sample costs of the replay memories on a 2**17-slot memory of small records."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from harness.execution.executor import GraphExecutor  # noqa: E402
from reference_agents.components.memories import PrioritizedReplay, ReplayMemory  # noqa: E402

CAPACITY = 2 ** 17
BATCH = 64
SPACES = {"records": "[B]{state: float32[4], action: int64[], reward: float32[], terminal: bool[]}",
          "num_records": "int64[]", "indices": "int64[B]"}


def _batch(rng: np.random.Generator, n: int) -> dict:
    return {"state": rng.standard_normal((n, 4)).astype(np.float32), "action": rng.integers(0, 4, n),
            "reward": rng.standard_normal(n).astype(np.float32), "terminal": rng.random(n) < 0.1}


class _Memory:
    """Shared setup: a 2**17-slot memory holding 100k records, and a batch of 64 to insert or sample."""

    timeout = 300

    def _setup(self, backend, component, spaces):
        self.executor = GraphExecutor(component, spaces, backend=backend)
        rng = np.random.default_rng(0)
        self.executor.execute("insert_records", _batch(rng, 100_000))
        self.batch = _batch(rng, BATCH)
        self.count = np.int64(BATCH)
        self.indices = rng.integers(0, 100_000, BATCH)
        self.priorities = rng.random(BATCH).astype(np.float32)


class ReplayMemories(_Memory):
    """One ``insert_records`` / ``get_records`` call of a uniform `ReplayMemory` with a batch of 64."""

    params = ["tf", "torch"]
    param_names = ["backend"]

    def setup(self, backend):
        self._setup(backend, ReplayMemory(CAPACITY), SPACES)

    def time_insert(self, backend):
        self.executor.execute("insert_records", self.batch)

    def time_sample(self, backend):
        self.executor.execute("get_records", self.count)


class PrioritizedMemories(_Memory):
    """One ``insert_records`` / ``get_records`` / ``update_records`` call of `PrioritizedReplay`, batch 64.

    Inserts and updates walk 17 tree levels twice (sum and min tree); sampling
    searches the sum tree from the root.
    """

    params = ["tf", "torch"]
    param_names = ["backend"]

    def setup(self, backend):
        self._setup(backend, PrioritizedReplay(CAPACITY), {**SPACES, "priorities": "float32[B]"})

    def time_insert(self, backend):
        self.executor.execute("insert_records", self.batch)

    def time_sample(self, backend):
        self.executor.execute("get_records", self.count)

    def time_update(self, backend):
        self.executor.execute("update_records", self.indices, self.priorities)
