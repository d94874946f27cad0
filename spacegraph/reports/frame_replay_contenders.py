"""Frame replay vs RLlib (issue 13): the Pong records and the stores, ours and RLlib's.

The data: n-step records (3-step, gamma 0.99, as ``dqn_pong`` folds them) of real ``ALE/Pong-v5`` frames
(``reference_agents.environments.make_env(..., atari=True)``: gray 84x84, 4 stacked, ``uint8[84,84,4]``) from
several environments stepped in lockstep with random actions (`pong_rollout`), handed out in recycled chunks
(`RecordStream`).

Contenders (each prioritized, alpha 0.6, beta 0.4, as ``dqn_pong``):

* ``ours`` / ``ours_lz4``: `HostFrameReplay` (each frame stored once; LZ4 per frame or not);
* ``rllib_lz4``: RLlib's ``PrioritizedReplayBuffer`` (``storage_unit="timesteps"``) fed
  ``SampleBatch``es compressed as RLlib's ``compress_observations=True`` compresses them
  (``SampleBatch.compress(bulk=False)``: each ``obs`` / ``new_obs`` stack LZ4-packed on its own);
* ``rllib``: the same buffer without compression (only where the memory it needs fits).

Used by `frame_replay_measure`; the figure is the ``frame_replay`` scenario of ``spacegraph report``.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from harness.measure.host import available_bytes, rss_bytes  # noqa: E402,F401  (the measure module uses them from here)

ENV_ID = "ALE/Pong-v5"
ALPHA, BETA = 0.6, 0.4
SAMPLE_BATCH = 32
RLLIB_MODULES = ("ray.rllib.policy.sample_batch", "ray.rllib.utils.replay_buffers.prioritized_replay_buffer")
TITLES = {"ours": "ours, HostFrameReplay", "ours_lz4": "ours, HostFrameReplay + LZ4",
          "rllib_lz4": "RLlib PrioritizedReplayBuffer, compress_observations", "rllib": "RLlib PrioritizedReplayBuffer"}


# ---- data ------------------------------------------------------------------------------------------
def pong_rollout(num_envs: int = 4, steps: int = 1000, n_step: int = 3, gamma: float = 0.99, seed: int = 0,
                 env_id: str = ENV_ID) -> dict[str, np.ndarray]:
    """n-step records of ``num_envs`` Pong environments stepped in lockstep ``steps`` times with random actions.

    Records come out in the order a `VectorEnvWorker` hands them to replay (all environments' finished
    windows after each lockstep step), as one batch of `RECORD_FIELDS` arrays.
    """
    from reference_agents.components.helpers import NStepAccumulator
    from reference_agents.environments import make_env
    from reference_agents.oracles.frame_replay import stack_records

    rng = np.random.default_rng(seed)
    envs = [make_env(env_id, atari=True) for _ in range(num_envs)]
    accs = [NStepAccumulator(n_step, gamma) for _ in range(num_envs)]
    obs = [env.reset(seed=seed + e)[0] for e, env in enumerate(envs)]
    n_actions = int(envs[0].action_space.n)
    rows: list[dict[str, Any]] = []
    for _ in range(steps):
        for e, env in enumerate(envs):
            action = int(rng.integers(0, n_actions))
            nxt, reward, term, trunc, _ = env.step(action)
            rows += accs[e].push(obs[e], action, float(reward), nxt, bool(term), bool(trunc))
            obs[e] = env.reset()[0] if term or trunc else nxt
    for env in envs:
        env.close()
    return stack_records(rows)


class RecordStream:
    """The rollout's records in consecutive chunks, starting again from the top at its end (recycled).

    Each chunk is a copy, as an environment hands over new arrays (a store that keeps what it is given,
    as RLlib's keeps its ``SampleBatch`` columns, then holds memory of its own, not views of the rollout).
    """

    def __init__(self, records: dict[str, np.ndarray], start: int = 0) -> None:
        self.records, self.n, self.pos = records, len(records["actions"]), start % len(records["actions"])

    def next(self, count: int) -> dict[str, np.ndarray]:
        take = min(count, self.n - self.pos)
        out = {k: v[self.pos:self.pos + take].copy() for k, v in self.records.items()}
        self.pos = (self.pos + take) % self.n
        return out


# ---- contenders --------------------------------------------------------------------------------------
class Ours:
    """`HostFrameReplay` as ``dqn_pong`` builds it (prioritized), LZ4 or not."""

    def __init__(self, capacity: int, compression: str | None, seed: int = 0) -> None:
        from reference_agents.components.memories import HostFrameReplay

        self.store = HostFrameReplay(capacity, (84, 84), 4, prioritized=True, alpha=ALPHA, beta=BETA,
                                     compression=compression, seed=seed)

    def insert(self, records: dict[str, np.ndarray]) -> None:
        self.store.add(records)

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        """States and next states as the store returns them: ``uint8[32,84,84,4]`` views of one gathered
        ``[64,4,84,84]`` array (frames stay channel-first in memory)."""
        records, _, _ = self.store.sample(SAMPLE_BATCH)
        return records["states"], records["next_states"]

    def sample_contiguous(self) -> tuple[np.ndarray, np.ndarray]:
        """States and next states as C-contiguous ``uint8[32,84,84,4]``: the store's NHWC path
        (``store.sample(32, layout="nhwc")``, gathered channel by channel, as a TensorFlow agent samples)."""
        records, _, _ = self.store.sample(SAMPLE_BATCH, layout="nhwc")
        return records["states"], records["next_states"]

    def size(self) -> int:
        return self.store.size

    def accounted_bytes(self) -> int:
        return self.store.nbytes()


class RLlibBuffer:
    """RLlib's ``PrioritizedReplayBuffer`` fed ``SampleBatch``es, compressed as ``compress_observations`` does."""

    def __init__(self, capacity: int, compress: bool, seed: int = 0) -> None:
        import random

        from ray.rllib.policy.sample_batch import SampleBatch
        from ray.rllib.utils.replay_buffers.prioritized_replay_buffer import PrioritizedReplayBuffer

        random.seed(seed)  # RLlib draws its masses with the random module
        self.cls, self.compress = SampleBatch, compress
        self.buffer = PrioritizedReplayBuffer(capacity=capacity, storage_unit="timesteps", alpha=ALPHA)

    def insert(self, records: dict[str, np.ndarray]) -> None:
        n = len(records["actions"])
        batch = self.cls({"obs": records["states"], "actions": records["actions"], "rewards": records["rewards"],
                          "terminateds": records["terminals"], "truncateds": np.zeros(n, bool),
                          "new_obs": records["next_states"]})
        if self.compress:
            batch.compress(bulk=False)  # what RolloutWorker does with compress_observations=True
        self.buffer.add(batch)

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        batch = self.buffer.sample(SAMPLE_BATCH, beta=BETA)  # decompresses obs / new_obs itself
        return batch["obs"], batch["new_obs"]  # contiguous uint8[32,84,84,4] (concatenated rows)

    def size(self) -> int:
        return len(self.buffer)

    def accounted_bytes(self) -> int:
        return int(self.buffer.stats()["est_size_bytes"])


def sample_contiguous(contender: Any) -> tuple[np.ndarray, np.ndarray]:
    """A sample with both arrays C-contiguous ``uint8[32,84,84,4]``: the contender's own contiguous path where
    it has one (ours: the NHWC gather), else its sample made contiguous (a copy only where it is not; RLlib's
    rows already are)."""
    own = getattr(contender, "sample_contiguous", None)
    states, next_states = own() if own is not None else contender.sample()
    return np.ascontiguousarray(states), np.ascontiguousarray(next_states)


def make_contender(name: str, capacity: int) -> Any:
    return {"ours": lambda: Ours(capacity, None), "ours_lz4": lambda: Ours(capacity, "lz4"),
            "rllib_lz4": lambda: RLlibBuffer(capacity, True), "rllib": lambda: RLlibBuffer(capacity, False)}[name]()
