"""Build overhead per phase: one component and a ~40-component graph, on both backends."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from harness.execution.executor import GraphExecutor  # noqa: E402
from harness.report.graphs import DenseStack, single_component  # noqa: E402
from harness.spaces import FloatBox  # noqa: E402

SPACES = {"inputs": FloatBox(16, batch_rank=True)}
GRAPHS = {"single": single_component, "stack40": lambda: DenseStack(blocks=13)}


class BuildOverhead:
    """Phase times of building a graph (assembly and build overhead exclude backend work)."""

    params = (["tf", "torch"], ["single", "stack40"])
    param_names = ["backend", "graph"]
    timeout = 300

    def setup(self, backend, graph):
        GraphExecutor(GRAPHS[graph](), SPACES, backend=backend)  # warm-up: imports, first traces
        self.profile = GraphExecutor(GRAPHS[graph](), SPACES, backend=backend).profile

    def time_build(self, backend, graph):
        GraphExecutor(GRAPHS[graph](), SPACES, backend=backend)

    def track_framework_overhead_ms(self, backend, graph):
        return self.profile.framework_overhead * 1e3

    track_framework_overhead_ms.unit = "ms"

    def track_assembly_ms(self, backend, graph):
        return self.profile.assembly * 1e3

    track_assembly_ms.unit = "ms"

    def track_backend_creation_ms(self, backend, graph):
        return (self.profile.variable_creation + self.profile.op_creation) * 1e3

    track_backend_creation_ms.unit = "ms"
