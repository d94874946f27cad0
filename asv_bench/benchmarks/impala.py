"""IMPALA throughput on distributed TensorFlow (issue 15): env frames/s the learner learns from, and its ratio
to one process stepping the same environments with random actions.

Ours: a learner (PyTorch backend) with 1, 2 or 4 actor processes on TF servers at 127.0.0.1
(`spacegraph.reports.impala_throughput.side_ours`), measured over a window after every actor delivered;
raw: `side_raw`. Each runs in this process one after the other (ours starts its own processes). The
comparison with RLlib's IMPALA needs RLlib and is in the report (``reports/impala/report.md``).
``SPACEGRAPH_BENCH_QUICK=1`` measures 1 actor on CartPole for 2 s.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from spacegraph.reports import impala_throughput as it  # noqa: E402

from .common import grid, quick  # noqa: E402


_MEASURED: dict = {}


class IMPALAThroughput:
    """Frames/s of IMPALA on distributed TF, and over raw env stepping, per env and actor count."""

    params = (grid(["cartpole", "pong"], ["cartpole"]), grid([1, 2, 4], [1]))
    param_names = ["env", "actors"]
    timeout = 900
    number = 1
    repeat = 1

    def setup(self, env, actors):
        # one measurement serves both track methods when they run in one process (the test suite's smoke run)
        key = (env, actors, quick())
        if key not in _MEASURED:
            seconds = 2.0 if quick() else 15.0
            _MEASURED[key] = (it.side_ours(env, actors, seconds), it.side_raw(env, 1, seconds))
        self.ours, self.raw = _MEASURED[key]

    def track_frames_per_s(self, env, actors):
        return self.ours["frames_per_s"]

    track_frames_per_s.unit = "frames/s"

    def track_ratio_to_raw_stepping(self, env, actors):
        return self.ours["frames_per_s"] / self.raw["frames_per_s"]

    track_ratio_to_raw_stepping.unit = "ratio"
