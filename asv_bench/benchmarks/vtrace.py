"""V-trace targets per call on short and long time-major rollouts, on both backends."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from harness.execution.executor import GraphExecutor  # noqa: E402
from reference_agents.components.losses import VTrace  # noqa: E402

from .common import grid  # noqa: E402

ARGS = ("log_rhos", "discounts", "rewards", "values", "bootstrap_value")


def _rollout(time: int, batch: int) -> dict[str, np.ndarray]:
    """Seeded V-trace inputs ``[T, B]`` (and a ``[B]`` bootstrap value), float32."""
    rng = np.random.default_rng(time * 1000 + batch)
    return {
        "log_rhos": rng.uniform(-1.0, 1.0, (time, batch)).astype(np.float32),
        "discounts": (rng.random((time, batch)) > 0.05).astype(np.float32),
        "rewards": rng.standard_normal((time, batch)).astype(np.float32),
        "values": rng.standard_normal((time, batch)).astype(np.float32),
        "bootstrap_value": rng.standard_normal(batch).astype(np.float32),
    }


class VTraceCall:
    """One ``VTrace.vtrace`` call through the compiled API function (tensors in, tensors out)."""

    params = (["tf", "torch"], grid(["20x32", "100x256"], ["20x32"]))
    param_names = ["backend", "shape"]
    timeout = 300

    def setup(self, backend, shape):
        time, batch = (int(s) for s in shape.split("x"))
        spaces = {a: "float32[B]" if a == "bootstrap_value" else "float32[T,B]" for a in ARGS}
        self.executor = GraphExecutor(VTrace(), spaces, backend=backend)
        data = _rollout(time, batch)
        self.data = [data[a] for a in ARGS]
        self.tensors = [self.executor.backend.to_tensor(v) for v in self.data]
        self.fn = self.executor.api_function("vtrace")
        self.fn(*self.tensors)  # warm-up

    def time_vtrace(self, backend, shape):
        self.fn(*self.tensors)

    def time_execute_numpy(self, backend, shape):
        self.executor.execute("vtrace", *self.data)
