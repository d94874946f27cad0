"""Build overhead and memory (RLgraph Fig. 5a): framework overhead of a single memory component and of a
whole DQN agent, per backend, and the memory a DQN agent build takes.

Framework overhead = assembly + build time outside backend variable and op creation (the
executor's `BuildProfile`), median over builds after a warm-up build. There is no same-run
peer: the RLgraph paper's numbers are drawn beside ours as other hardware.
"""

from __future__ import annotations

import statistics
from typing import Any

from harness.measure.figures import Figure, Panel, Series, Table
from harness.measure.host import rss_bytes
from spacegraph.report.registry import Context, Scenario, register

BACKENDS = ("tf", "torch")
TITLES = {"tf": "TF", "torch": "PyTorch"}
CATEGORIES = ["single memory component", "DQN agent"]
#: The replay capacity the DQN builds use (as the asv build benchmarks): an Atari memory of full size
#: would allocate gigabytes per build; the graph is the same.
DQN_MAX_CAPACITY = 1_000


def memory_component() -> tuple[Any, dict[str, str]]:
    """A factory of the prioritized replay memory (capacity 1000) and its input spaces."""
    from reference_agents.components.memories import PrioritizedReplay
    from spacegraph.reports.replay_peers import RECORD

    spaces = {"records": RECORD, "num_records": "int64[]", "indices": "int64[B]", "priorities": "float32[B]"}
    return (lambda: PrioritizedReplay(1_000, alpha=0.6, beta=0.4, epsilon=1e-6)), spaces


def dqn_config(name: str) -> dict[str, Any]:
    """``reference_agents/configs/<name>.yaml`` as a dict, replay capacity capped at `DQN_MAX_CAPACITY`."""
    import yaml

    from reference_agents.agents import CONFIG_DIR

    with open(f"{CONFIG_DIR}/{name}.yaml", encoding="utf-8") as f:
        config = yaml.safe_load(f)
    memory = config.setdefault("memory", {})
    memory["capacity"] = min(int(memory.get("capacity", DQN_MAX_CAPACITY)), DQN_MAX_CAPACITY)
    return config


def measure(backends: tuple[str, ...] = BACKENDS, builds: int = 3, config: str = "dqn_cartpole",
            progress: Any = None) -> dict[str, Any]:
    """Per backend: median phase times (s) of the memory component and the DQN agent, and build memory.

    Returns:
        ``{"config", "builds", "rows": [{"backend", "graph", "framework_overhead_s", "assembly_s",
        "build_overhead_s", "backend_creation_s", "components", "rss_delta_mib"}]}``.
    """
    from harness.execution.executor import GraphExecutor
    from reference_agents.agents import build_agent

    mem_factory, mem_spaces = memory_component()
    cfg = dqn_config(config)
    rows = []
    for backend in backends:
        if progress:
            progress.step(f"{backend}: memory component")
        GraphExecutor(mem_factory(), mem_spaces, backend=backend)  # warm-up: imports, first traces
        mem = [GraphExecutor(mem_factory(), mem_spaces, backend=backend).profile for _ in range(builds)]
        if progress:
            progress.step(f"{backend}: DQN agent")
        build_agent(cfg, backend=backend, seed=0)  # warm-up
        before = rss_bytes()
        held = [build_agent(cfg, backend=backend, seed=0) for _ in range(builds)]
        rss_delta = (rss_bytes() - before) / builds / 2 ** 20
        agents = [a.executor.profile for a in held]
        del held
        for graph, profiles, rss in (("single memory component", mem, None), ("DQN agent", agents, rss_delta)):
            rows.append({
                "backend": backend, "graph": graph,
                "framework_overhead_s": statistics.median(p.framework_overhead for p in profiles),
                "assembly_s": statistics.median(p.assembly for p in profiles),
                "build_overhead_s": statistics.median(p.build_overhead for p in profiles),
                "backend_creation_s": statistics.median(p.variable_creation + p.op_creation for p in profiles),
                "components": profiles[-1].components, "rss_delta_mib": rss})
    return {"config": config, "builds": builds, "max_capacity": DQN_MAX_CAPACITY, "rows": rows}


def figures(result: dict[str, Any]) -> list[Figure]:
    """The build figure: grouped bars of framework overhead (ms) per graph and backend, and the table."""
    panel = Panel(title="framework overhead per build", y_label="ms (log)", y_log=True, categories=CATEGORIES)
    series = []
    for backend in dict.fromkeys(r["backend"] for r in result["rows"]):
        rows = [r for r in result["rows"] if r["backend"] == backend]
        series.append(Series(label=f"ours, {TITLES[backend]}", x=[r["graph"] for r in rows],
                             y=[r["framework_overhead_s"] * 1e3 for r in rows], panel=panel.title))
    table = Table(
        title=f"Median of {result['builds']} builds after a warm-up (DQN agent: reference_agents/configs/"
              f"{result['config']}.yaml, replay capacity capped at {result['max_capacity']})",
        header=["backend", "graph", "components", "framework overhead ms", "assembly ms", "build overhead ms",
                "backend creation ms", "resident memory per agent MiB"],
        rows=[[TITLES[r["backend"]], r["graph"], r["components"], r["framework_overhead_s"] * 1e3,
               r["assembly_s"] * 1e3, r["build_overhead_s"] * 1e3, r["backend_creation_s"] * 1e3,
               r["rss_delta_mib"]] for r in result["rows"]])
    notes = ["Framework overhead = assembly + build time outside backend variable and op creation "
             "(what spacegraph itself costs; the paper's 'overhead' is the same split).",
             "Resident memory per agent: growth of this process's RSS over the builds held at once, divided by "
             "the number of builds (framework imports and the warm-up excluded).",
             "No same-run peer: RLlib has no comparable build phase split; the paper's numbers are other hardware "
             "and older framework versions."]
    agent = [r for r in result["rows"] if r["graph"] == CATEGORIES[-1]]
    headline = f"framework overhead of building the {result['config']} DQN agent: " + ", ".join(
        f"{TITLES[r['backend']]} {r['framework_overhead_s'] * 1e3:.0f} ms" for r in agent)
    return [Figure(name="build", title="Build overhead and memory", figure_ref="RLgraph Fig. 5a", panels=[panel],
                   series=series, tables=[table], notes=notes, raw=result, headline=headline)]


def run(ctx: Context) -> list[Figure]:
    result = measure(builds=2 if ctx.quick else 5, config="dqn_cartpole" if ctx.quick else "dqn_pong",
                     progress=ctx.progress)
    return figures(result)


SCENARIO = register(Scenario(name="build", title="Build overhead and memory", figure_ref="RLgraph Fig. 5a",
                             run=run, steps=lambda ctx: 2 * len(BACKENDS),
                             render=figures))
