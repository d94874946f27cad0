"""Update overhead: one DQN learning step through the framework vs written by hand (same step), per network."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from .common import agent_config_path, grid, quick  # noqa: E402


class DQNUpdate:
    """``update_from_batch`` (NumPy in and out) vs the same network, loss and Adam by hand, batch 32.

    ``cartpole``: the dqn_cartpole agent's dense MLP; ``nature``: the dqn_pong agent's Nature CNN on uint8
    frames (`spacegraph.reports.update_overhead`).
    """

    params = (["tf", "torch"], grid(["cartpole", "nature"], ["cartpole"]))
    param_names = ["backend", "network"]
    timeout = 300

    def setup(self, backend, network):
        from spacegraph.reports.update_overhead import CONFIGS, setup_pair

        agent_config_path(CONFIGS[network])
        self.framework, self.hand = setup_pair(backend, 32, network=network)

    def time_framework(self, backend, network):
        self.framework()

    def time_hand_written(self, backend, network):
        self.hand()

    def track_hand_over_framework(self, backend, network):
        """Hand-written time over framework time (updates/s framework over hand; 1.0: no overhead)."""
        from spacegraph.reports.update_overhead import measure

        return measure(backend, 32, seconds=0.2 if quick() else 4.0, rounds=2 if quick() else 8,
                       network=network)["ratio"]

    track_hand_over_framework.unit = "ratio"
