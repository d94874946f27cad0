"""Build overhead per phase: one component, a ~40-component graph and a whole DQN agent graph, on both backends."""

import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from harness.execution.executor import GraphExecutor  # noqa: E402
from spacegraph.reports.graphs import DenseStack, single_component  # noqa: E402
from harness.spaces import FloatBox  # noqa: E402

from .common import agent_config_path, grid, installed_backends, quick  # noqa: E402

SPACES = {"inputs": FloatBox(16, batch_rank=True)}
GRAPHS = {"single": single_component, "stack40": lambda: DenseStack(blocks=13)}


class BuildOverhead:
    """Phase times of building a graph (assembly and build overhead exclude backend work)."""

    params = (["tf", "torch"], grid(["single", "stack40"], ["single"]))
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


# The replay capacity the DQN build benchmarks cap configs at: an Atari memory of 84x84x4 uint8
# frames (two per record) would otherwise allocate gigabytes per build; the graph is the same.
DQN_MAX_CAPACITY = 1_000
DQN_CONFIGS = ["dqn_cartpole", "dqn_pong"]


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


def dqn_build_phases(config: dict, backend: str, builds: int) -> dict[str, float]:
    """Median seconds per build phase over ``builds`` agent builds from ``config`` on ``backend``."""
    from reference_agents.agents import build_agent

    runs = [build_agent(config, backend=backend, seed=0).executor.profile for _ in range(builds)]
    return {
        "framework_overhead": statistics.median(p.framework_overhead for p in runs),
        "assembly": statistics.median(p.assembly for p in runs),
        "build_overhead": statistics.median(p.build_overhead for p in runs),
        "backend_creation": statistics.median(p.variable_creation + p.op_creation for p in runs),
    }


class DQNBuild:
    """`build_agent` end to end (config, spaces, the whole `DQNGraph`: Q-network, target network,
    epsilon-greedy, replay, DQN loss, optimizer, synchronizer; 12+ API methods), after a warm-up build:
    its time, and the peak memory of the process that does it."""

    params = (["tf", "torch"], grid(DQN_CONFIGS, DQN_CONFIGS[:1]))
    param_names = ["backend", "config"]
    timeout = 600
    rounds = 1
    repeat = (1, 5, 10.0)

    def setup(self, backend, config):
        from reference_agents.agents import build_agent

        self.build_agent = build_agent
        self.config = dqn_config(config)
        build_agent(self.config, backend=backend, seed=0)  # warm-up: imports, first traces

    def time_build_agent(self, backend, config):
        self.build_agent(self.config, backend=backend, seed=0)

    def peakmem_build_agent(self, backend, config):
        """Peak resident memory of the benchmark process: framework imports, the warm-up build and one build."""
        self.build_agent(self.config, backend=backend, seed=0)


class DQNBuildPhases:
    """Build phases of a whole DQN agent graph: medians over three builds after a warm-up of the
    executor's `BuildProfile`. Framework overhead = assembly + build time outside backend variable/op
    creation. All pairs are built once in ``setup_cache``; a smoke run builds the CartPole config once
    per backend and skips the rest."""

    params = (["tf", "torch"], grid(DQN_CONFIGS, DQN_CONFIGS[:1]))
    param_names = ["backend", "config"]
    timeout = 900

    def setup_cache(self):
        phases: dict[tuple[str, str], dict[str, float] | str] = {}
        for backend in installed_backends():
            for name in DQN_CONFIGS:
                if quick() and name != DQN_CONFIGS[0]:
                    phases[(backend, name)] = "a smoke run (SPACEGRAPH_BENCH_QUICK) builds the first config only"
                    continue
                try:
                    config = dqn_config(name)
                except NotImplementedError as exc:
                    phases[(backend, name)] = str(exc)
                    continue
                if not quick():
                    dqn_build_phases(config, backend, builds=1)  # warm-up: imports, first traces
                phases[(backend, name)] = dqn_build_phases(config, backend, builds=1 if quick() else 3)
        return phases

    setup_cache.timeout = 900

    def setup(self, phases, backend, config):
        entry = phases.get((backend, config), f"backend {backend} is not installed or not selected")
        if isinstance(entry, str):
            raise NotImplementedError(entry)
        self.phases = entry

    def track_framework_overhead_ms(self, phases, backend, config):
        return self.phases["framework_overhead"] * 1e3

    track_framework_overhead_ms.unit = "ms"

    def track_assembly_ms(self, phases, backend, config):
        return self.phases["assembly"] * 1e3

    track_assembly_ms.unit = "ms"

    def track_build_overhead_ms(self, phases, backend, config):
        return self.phases["build_overhead"] * 1e3

    track_build_overhead_ms.unit = "ms"

    def track_backend_creation_ms(self, phases, backend, config):
        return self.phases["backend_creation"] * 1e3

    track_backend_creation_ms.unit = "ms"
