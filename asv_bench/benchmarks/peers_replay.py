"""Prioritized replay beside RLlib's `PrioritizedReplayBuffer`: batches of 64 on a 100k-record memory.

Both memories hold 100k records (filled in setup) with alpha 0.6 and beta 0.4.
Operations: ``insert`` (64 new records), ``sample`` (64 prioritized draws with
weights), ``update`` (new priorities for 64 sampled slots) and ``step`` (the three
in a row, one training iteration). Ours is called through `GraphExecutor.execute`
(NumPy in and out). Skipped (``NotImplementedError`` in setup) where ``ray[rllib]``
is not installed: ``pip install -e '.[peers]'``. The workload is the one of
`spacegraph.reports.replay_peers`; the figure is ``spacegraph report --only replay`` (``reports/replay/``).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from harness.measure import timing  # noqa: E402  (not its time_us: asv would take it for a benchmark)
from spacegraph.reports import replay_peers as rp  # noqa: E402

from .common import grid, quick  # noqa: E402

CAPACITY = 100_000
BATCH = 64
ALPHA, BETA, EPSILON = 0.6, 0.4, 1e-6
RATIO_SECONDS = 0.05 if quick() else 0.25  # per time_us of a ratio


def _need_rllib() -> None:
    # rllib_version imports TensorFlow first: RLlib would otherwise switch TF's eager mode off.
    if rp.rllib_version() is None:
        raise NotImplementedError("ray[rllib] is not installed")


class RLlibPrioritizedReplay:
    """RLlib's buffer alone (no backend parameter): one add / sample / update_priorities of 64 rows."""

    timeout = 300

    def setup(self):
        _need_rllib()
        self.calls = rp.rllib_calls(rp.build_rllib(CAPACITY, ALPHA), BATCH, BETA)

    def time_rllib_insert(self):
        self.calls["insert"]()

    def time_rllib_sample(self):
        self.calls["sample"]()

    def time_rllib_update(self):
        self.calls["update"]()

    def time_rllib_step(self):
        self.calls["step"]()


class PrioritizedReplayVsRLlib:
    """Our `PrioritizedReplay` per backend, and its speed relative to RLlib's (RLlib time / ours, >1: ours faster)."""

    params = grid(["tf", "torch"], ["torch"])  # quick pass: torch (the test suite's smoke run takes tf)
    param_names = ["backend"]
    timeout = 300

    def setup(self, backend):
        _need_rllib()
        self.ours = rp.ours_calls(rp.build_ours(backend, CAPACITY, ALPHA, BETA, EPSILON), BATCH)["execute"]
        self.rllib = rp.rllib_calls(rp.build_rllib(CAPACITY, ALPHA), BATCH, BETA)

    def time_ours_insert(self, backend):
        self.ours["insert"]()

    def time_ours_sample(self, backend):
        self.ours["sample"]()

    def time_ours_update(self, backend):
        self.ours["update"]()

    def time_ours_step(self, backend):
        self.ours["step"]()

    def _ratio(self, op):
        return timing.time_us(self.rllib[op], RATIO_SECONDS) / timing.time_us(self.ours[op], RATIO_SECONDS)

    def track_speed_ratio_step(self, backend):
        return self._ratio("step")

    track_speed_ratio_step.unit = "ratio"

    def track_speed_ratio_insert(self, backend):
        return self._ratio("insert")

    track_speed_ratio_insert.unit = "ratio"

    def track_speed_ratio_sample(self, backend):
        return self._ratio("sample")

    track_speed_ratio_sample.unit = "ratio"

    def track_speed_ratio_update(self, backend):
        return self._ratio("update")

    track_speed_ratio_update.unit = "ratio"
