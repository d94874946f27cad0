"""Update overhead: one DQN CartPole learning step through the framework vs written by hand (same step)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from .common import agent_config_path, quick  # noqa: E402


class DQNUpdate:
    """``update_from_batch`` (NumPy in and out) vs the same network, loss and Adam by hand, batch 32."""

    params = ["tf", "torch"]
    param_names = ["backend"]
    timeout = 300

    def setup(self, backend):
        agent_config_path("dqn_cartpole")
        from spacegraph.reports.update_overhead import setup_pair

        self.framework, self.hand = setup_pair(backend, 32)

    def time_framework(self, backend):
        self.framework()

    def time_hand_written(self, backend):
        self.hand()

    def track_hand_over_framework(self, backend):
        """Hand-written time over framework time (updates/s framework over hand; 1.0: no overhead)."""
        from spacegraph.reports.update_overhead import measure

        return measure(backend, 32, seconds=0.2 if quick() else 4.0, rounds=2 if quick() else 8)["ratio"]

    track_hand_over_framework.unit = "ratio"
