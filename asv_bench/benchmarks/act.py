"""Act throughput (RLgraph Fig. 5b): a dueling Nature-DQN actor through the framework vs written by hand."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from spacegraph.reports.act_throughput import measure, setup_pair  # noqa: E402

from .common import grid, quick  # noqa: E402


class ActThroughput:
    """One ``q_values`` call on ``float32[B,84,84,4]`` states (same weights on both sides)."""

    params = (["tf", "torch"], grid([1, 4, 16, 64], [4]))
    param_names = ["backend", "batch"]
    timeout = 300

    def setup(self, backend, batch):
        self.framework, self.hand, self.states = setup_pair(backend, batch)

    def time_framework(self, backend, batch):
        self.framework(self.states)

    def time_hand_written(self, backend, batch):
        self.hand(self.states)

    def track_ratio(self, backend, batch):
        """Framework calls/s over hand-written calls/s (1.0 means no framework overhead)."""
        return measure(backend, batch_sizes=(batch,), seconds=0.05 if quick() else 0.2)[batch]["ratio"]

    track_ratio.unit = "ratio"
