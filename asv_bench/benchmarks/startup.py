"""Start-up: seconds from ``spacegraph train dqn_cartpole`` to its first progress line (target: 3 s)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from .common import agent_config_path  # noqa: E402


class TrainStartup:
    """A fresh ``spacegraph train`` process per sample: import, config, build and the first step."""

    params = ["tf", "torch"]
    param_names = ["backend"]
    timeout = 300

    def setup(self, backend):
        agent_config_path("dqn_cartpole")

    def track_first_progress_seconds(self, backend):
        """Seconds from the subprocess's start to its first progress line on stderr."""
        from spacegraph.reports.startup_time import first_progress_seconds

        return first_progress_seconds(backend)

    track_first_progress_seconds.unit = "seconds"
