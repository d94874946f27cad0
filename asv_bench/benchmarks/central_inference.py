"""Central batched inference (SEED style) against IMPALA's actor-learner mode (issue 21), as the network grows.

Both modes train the same IMPALA config (PyTorch backend) with one learner and ``n`` actor threads
(`spacegraph.reports.central_inference.measure`, each mode in a child process of its own, one after the
other), measured over a window after every actor delivered: env frames/s the learner learned from, their
ratio central / actor-learner (above 1: central inference wins), and the central mode's achieved
inference batch in environments. The report (``reports/central_inference/report.md``) runs more networks and
actor counts, and the actor-process transport. ``SPACEGRAPH_BENCH_QUICK=1`` measures the MLP with 2
actors for 2 s per mode.
"""

from .common import grid, quick, require_module

_MEASURED: dict = {}


def _child(mode: str, network: str, actors: int, seconds: float) -> dict:
    """One point measured in a fresh process (`central_inference.run_child`); a failed one fails the benchmark."""
    from spacegraph.reports.central_inference import run_child

    point = run_child(mode, network, actors, seconds, timeout=600.0)
    if "error" in point:
        raise RuntimeError(f"central_inference --child {mode} {network} {actors} failed: {point['error']}")
    return point


class CentralInference:
    """Frames/s of both modes, their ratio, and the achieved inference batch, per network and actor count."""

    params = (grid(["mlp", "mlp+lstm", "resnet", "resnet+lstm", "nature"], ["mlp"]), grid([2, 8], [2]))
    param_names = ["network", "actors"]
    timeout = 900
    number = 1
    repeat = 1

    def setup(self, network, actors):
        require_module("reference_agents.agents.impala.central_inference")
        key = (network, actors, quick())
        if key not in _MEASURED:  # one measurement serves every track method run in this process
            seconds = 2.0 if quick() else 10.0
            _MEASURED[key] = {mode: _child(mode, network, actors, seconds) for mode in ("actor-learner", "central")}
        self.points = _MEASURED[key]

    def track_central_frames_per_s(self, network, actors):
        return self.points["central"]["frames_per_s"]

    track_central_frames_per_s.unit = "frames/s"

    def track_actor_learner_frames_per_s(self, network, actors):
        return self.points["actor-learner"]["frames_per_s"]

    track_actor_learner_frames_per_s.unit = "frames/s"

    def track_central_over_actor_learner(self, network, actors):
        return self.points["central"]["frames_per_s"] / self.points["actor-learner"]["frames_per_s"]

    track_central_over_actor_learner.unit = "ratio"

    def track_inference_batch_envs(self, network, actors):
        return self.points["central"]["mean_batch_envs"]

    track_inference_batch_envs.unit = "envs"
