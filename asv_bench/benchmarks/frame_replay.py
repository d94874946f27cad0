"""The host-side frame replay on real Pong frames: insert and sample rates, bytes per transition, LZ4 or not,
and the build time of the whole ``dqn_pong`` agent (1M-transition frame replay)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from reference_agents.components.memories import HostFrameReplay  # noqa: E402

_ROLLOUT: dict = {}


def pong_records(steps: int = 600, n_step: int = 3) -> dict:
    """n-step records of 4 Pong envs (env-side 84x84x4 frames) under random actions, as a worker samples them."""
    if steps not in _ROLLOUT:
        from reference_agents.components.helpers import NStepAccumulator
        from reference_agents.environments import make_env
        from reference_agents.oracles.frame_replay import stack_records

        rng = np.random.default_rng(0)
        rows = []
        for e in range(4):
            env, acc = make_env("ALE/Pong-v5", atari=True), NStepAccumulator(n_step, 0.99)
            obs, _ = env.reset(seed=e)
            for _ in range(steps // 4):
                nxt, r, term, trunc, _ = env.step(int(rng.integers(0, 6)))
                rows += acc.push(obs, 0, r, nxt, term, trunc)
                obs = env.reset()[0] if term or trunc else nxt
            env.close()
        _ROLLOUT[steps] = stack_records(rows)
    return _ROLLOUT[steps]


class FrameReplayHost:
    """`HostFrameReplay` (prioritized, 1M transitions) holding a Pong rollout; batches of 32."""

    params = [[None, "lz4"]]
    param_names = ["compression"]
    timeout = 600

    def setup(self, compression):
        self.records = pong_records()
        self.store = HostFrameReplay(1_000_000, (84, 84), 4, compression=compression, seed=0)
        for _ in range(4):
            self.store.add(self.records)
        self.slots = np.arange(32)

    def time_insert_32(self, compression):
        self.store.add({k: v[:32] for k, v in self.records.items()})

    def time_sample_32(self, compression):
        self.store.sample(32)

    def time_sample_32_nhwc(self, compression):
        self.store.sample(32, layout="nhwc")  # C-contiguous NHWC stacks (what a TensorFlow agent asks for)

    def track_bytes_per_transition(self, compression):
        # what 1M transitions would take at this rollout's frames per transition and compression ratio
        ix, store = self.store.index, self.store
        per_frame = 84 * 84 if not compression else \
            (store.frame_nbytes() - 8 * len(store.packed)) / ix.frames_written + 8  # blob + header + pointer
        meta = (store.nbytes() - store.frame_nbytes()) / store.capacity
        return per_frame * ix.frames_written / ix.added + meta

    track_bytes_per_transition.unit = "bytes"


class DQNPongBuild:
    """Building the whole ``dqn_pong`` agent (1M-transition host frame replay) on each backend."""

    params = [["tf", "torch"]]
    param_names = ["backend"]
    timeout = 300
    number = 1
    repeat = 2

    def time_build_agent(self, backend):
        from reference_agents.agents import build_agent

        build_agent("dqn_pong", backend=backend)


class FrameReplayPeakMemory:
    """Peak resident memory of a process holding a 20k-transition `HostFrameReplay` of recycled Pong records
    (asv's ``peakmem``: the whole benchmark process, the interpreter and the rollout included; the store's
    own share is about 20k x 7.1 KB = 0.14 GB uncompressed). The 1M figures are in
    ``reports/frame_replay/report.md``."""

    params = [[None, "lz4"]]
    param_names = ["compression"]
    timeout = 600

    def setup(self, compression):
        self.records = pong_records()

    def peakmem_fill_20k(self, compression):
        store = HostFrameReplay(20_000, (84, 84), 4, compression=compression, seed=0)
        n, added = len(self.records["actions"]), 0
        while added < 20_000:
            take = min(512, n - added % n, 20_000 - added)
            start = added % n
            store.add({k: v[start:start + take].copy() for k, v in self.records.items()})
            added += take
        return store
