"""Per-call cost through the framework's contracted call chain vs the same graph functions by hand."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from harness.execution.executor import GraphExecutor  # noqa: E402
from spacegraph.reports.call_overhead import by_hand, measure  # noqa: E402
from spacegraph.reports.graphs import DenseStack  # noqa: E402
from harness.spaces import FloatBox  # noqa: E402

from .common import grid, quick  # noqa: E402


class CallOverhead:
    """One API call of a small and a ~40-component Dense stack, framework vs by hand."""

    params = (["tf", "torch"], grid([1, 13], [1]))
    param_names = ["backend", "blocks"]
    timeout = 300

    def setup(self, backend, blocks):
        self.executor = GraphExecutor(DenseStack(blocks=blocks), {"inputs": FloatBox(16, batch_rank=True)},
                                      backend=backend)
        x = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
        self.x = self.executor.backend.to_tensor(x)
        self.x_np = x
        self.framework = self.executor.api_function("apply")
        self.hand = by_hand(self.executor, "apply")

    def time_framework_call(self, backend, blocks):
        self.framework(self.x)

    def time_hand_call(self, backend, blocks):
        self.hand(self.x)

    def time_execute_numpy(self, backend, blocks):
        self.executor.execute("apply", self.x_np)

    def track_framework_over_hand(self, backend, blocks):
        return measure(backend, blocks=blocks, seconds=0.1 if quick() else 0.5)["ratio"]

    track_framework_over_hand.unit = "ratio"
