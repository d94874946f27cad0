"""Ape-X throughput (RLgraph Fig. 6 on one machine): env frames/s of `ApexDriver` on CartPole with 1, 2, 4 workers,
learning off and on, on the Ray executor and in one process; raw stepping of the same vector beside it.

The full report, with Pong and RLlib's DQN at the same number of env runners, is
``spacegraph.reports.apex_throughput`` (``reports/apex/report.md``). Rates are env frames per
wall-clock second over a fixed window after warm-up (a distributed run's rate is what its processes do
together; CPU time of one process would miss the actors). ``SPACEGRAPH_BENCH_QUICK=1`` measures the
in-process executor with one worker for a fraction of a second (no Ray started).
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .common import grid, quick  # noqa: E402


def _window() -> float:
    return 0.5 if quick() else 10.0


class ApexThroughput:
    """`ApexDriver` on apex_cartpole.yaml (free-running learner), env frames/s over a window after warm-up."""

    # the first combination (local, 1 worker, no learning) is what the test suite's smoke run measures
    params = (grid(["local", "ray"], ["local"]), grid([1, 2, 4], [1]), [False, True])
    param_names = ["executor", "workers", "learning"]
    timeout = 600

    def setup(self, executor, workers, learning):
        from reference_agents.agents.apex import ApexDriver
        from reference_agents.training.apex import make_actor_executor
        from spacegraph.reports.apex_throughput_measure import LEARNING_STARTS, apex_config

        if executor == "ray" and quick():
            raise NotImplementedError("the smoke pass starts no Ray instance")
        self.executor = make_actor_executor(executor, num_cpus=max(2, workers + 2),
                                            object_store_memory=300 * 1024 * 1024 if executor == "ray" else None)
        config = apex_config("cartpole", workers, learning)
        if quick():
            config["update"]["start_after"] = 64 if learning else 10 ** 12
            config["update"]["batch_size"] = 32
        self.driver = ApexDriver(config, self.executor)
        warm = config["update"]["start_after"] if learning else LEARNING_STARTS["cartpole"]
        self.driver.run(num_steps=min(warm, 10 ** 6) + 2 * self.driver.config.apex.sample_steps * workers)

    def teardown(self, executor, workers, learning):
        self.driver.close()
        self.executor.shutdown()

    def track_frames_per_s(self, executor, workers, learning):
        """Env frames per wall-clock second of the whole run (workers, shards, learner together)."""
        start, steps0 = time.perf_counter(), self.driver.total_steps
        window = _window()
        self.driver.run(num_steps=10 ** 12, callback=lambda s: time.perf_counter() - start < window,
                        callback_every=1)
        return (self.driver.total_steps - steps0) * self.driver.frames_per_step / (time.perf_counter() - start)

    track_frames_per_s.unit = "frames/s"


class RawCartPoleStepping:
    """One worker's CartPole environment vector stepped with random actions (the ceiling of one worker)."""

    timeout = 120

    def setup(self):
        from spacegraph.reports.apex_throughput_measure import apex_config
        from spacegraph.reports.sampling_contenders import RawContender, env_factory

        self.raw = RawContender(env_factory(apex_config("cartpole", 1, False)), 1)
        self.raw.chunk(50)

    def teardown(self):
        self.raw.close()

    def track_frames_per_s(self):
        """Env frames per wall-clock second."""
        start, steps = time.perf_counter(), 0
        while time.perf_counter() - start < _window():
            steps += self.raw.chunk(200)[0]
        return steps * self.raw.frames_per_step / (time.perf_counter() - start)

    track_frames_per_s.unit = "frames/s"
