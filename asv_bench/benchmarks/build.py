"""Build overhead per phase: one component, a ~40-component graph and a whole DQN agent graph, on both backends."""

import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from harness.execution.executor import GraphExecutor  # noqa: E402
from harness.report.graphs import DenseStack, single_component  # noqa: E402
from harness.spaces import FloatBox  # noqa: E402

from .common import agent_config_path, quick  # noqa: E402

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


# The replay capacity the DQN build benchmark caps configs at: an Atari memory of 84x84x4 uint8
# frames (two per record) would otherwise allocate gigabytes per build; the graph is the same.
DQN_MAX_CAPACITY = 10_000


def dqn_config(name: str) -> dict:
    """The agent config ``reference_agents/configs/<name>.yaml`` as a dict, replay capacity capped.

    Raises:
        NotImplementedError: (asv: skip) while the agents or the config do not exist in this tree.
    """
    import yaml

    with open(agent_config_path(name), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    memory = config.setdefault("memory", {})
    memory["capacity"] = min(int(memory.get("capacity", DQN_MAX_CAPACITY)), DQN_MAX_CAPACITY)
    return config


class DQNBuildOverhead:
    """Building a whole DQN agent graph (`DQNGraph`: Q-network, target network, epsilon-greedy, replay,
    DQN loss, optimizer, synchronizer; 12 API methods) from an agent config, per phase.

    ``time_build_agent`` is `build_agent` end to end (config, spaces, graph, build);
    the ``track_`` figures are medians over three builds (one in a smoke run) of the executor's `BuildProfile`
    (framework overhead = assembly + build time outside backend variable/op creation).
    """

    params = (["tf", "torch"], ["dqn_cartpole", "dqn_pong"])
    param_names = ["backend", "config"]
    timeout = 600
    rounds = 1
    repeat = (1, 5, 10.0)

    def setup(self, backend, config):
        from reference_agents.agents import build_agent

        self.build_agent = build_agent
        self.config = dqn_config(config)
        build_agent(self.config, backend=backend, seed=0)  # warm-up: imports, first traces
        runs = [build_agent(self.config, backend=backend, seed=0).executor.profile
                for _ in range(1 if quick() else 3)]
        self.phases = {
            "framework_overhead": statistics.median(p.framework_overhead for p in runs),
            "assembly": statistics.median(p.assembly for p in runs),
            "build_overhead": statistics.median(p.build_overhead for p in runs),
            "backend_creation": statistics.median(p.variable_creation + p.op_creation for p in runs),
        }

    def time_build_agent(self, backend, config):
        self.build_agent(self.config, backend=backend, seed=0)

    def track_framework_overhead_ms(self, backend, config):
        return self.phases["framework_overhead"] * 1e3

    track_framework_overhead_ms.unit = "ms"

    def track_assembly_ms(self, backend, config):
        return self.phases["assembly"] * 1e3

    track_assembly_ms.unit = "ms"

    def track_build_overhead_ms(self, backend, config):
        return self.phases["build_overhead"] * 1e3

    track_build_overhead_ms.unit = "ms"

    def track_backend_creation_ms(self, backend, config):
        return self.phases["backend_creation"] * 1e3

    track_backend_creation_ms.unit = "ms"
