"""The ops of the traced PyTorch CartPole act graph, and where a worker's step goes besides acting (issue 18).

    python reports/profiles/scripts/act_graph_ops.py > reports/profiles/act_dqn_cartpole_torch_graph_after.txt

Part 1 builds the sampling report's traced agent (`sampling_overhead.traced_config("cartpole")`: constant
epsilon 0.1, ``execution.trace: [act]``), acts once on 4 states and prints every aten op of the recorded
graph, then their count. Op lists are exact.

Part 2 runs the sampling report's contenders at 4 environments (the hand-written direct loop, the worker
acting through the loop's hand-written act, the worker acting through the traced agent) and splits each
lockstep step into stepping the environments, acting, and the rest (the worker's own bookkeeping), timed
with ``perf_counter_ns`` around ``VectorEnv.step`` and ``get_actions``: the fastest of 7 interleaved rounds
of 10,000 env steps each. Times move with the host's load.
"""

import time

from harness.backends.torch.tracing import TracedApi
from harness.measure.machine import configure_threads
from harness.measure.timing import interleaved
from reference_agents.agents import DQNAgent
from spacegraph.reports import sampling_overhead

NUM_ENVS = 4


def graph_ops() -> list[str]:
    agent = DQNAgent(sampling_overhead.traced_config("cartpole"), backend="torch", seed=0)
    agent.get_actions(agent.state_space.with_batch_rank().sample(size=NUM_ENVS, rng=0))
    api = agent.executor.api_function("act")  # the backend's call wrapper around the TracedApi
    while not isinstance(api, TracedApi):
        api = api.__wrapped__
    (graph,) = api.graphs.values()
    return [node.kind() for node in graph.inlined_graph.nodes() if node.kind().startswith("aten::")]


def instrument(contender) -> dict[str, int]:
    """Wraps the contender's ``VectorEnv.step`` and ``get_actions`` to add up their nanoseconds."""
    worker = getattr(contender, "worker", None)
    envs = worker.envs if worker is not None else contender.envs
    actor = worker.agent if worker is not None else contender.actor
    spent = {"env": 0, "act": 0}
    clock, env_step, act = time.perf_counter_ns, envs.step, actor.get_actions

    def timed_step(actions):
        t = clock()
        out = env_step(actions)
        spent["env"] += clock() - t
        return out

    def timed_act(states, explore=True):
        t = clock()
        out = act(states, explore=explore)
        spent["act"] += clock() - t
        return out
    envs.step, actor.get_actions = timed_step, timed_act
    return spent


def split(contenders: dict, rounds: int = 7, steps: int = 10_000) -> dict[str, tuple[float, float, float]]:
    """Per contender ``(total, env, act)`` microseconds per lockstep step: the fastest of ``rounds`` interleaved
    rounds (the contenders take turns, in reversed order every other round: `harness.measure.timing.interleaved`,
    so a change in the host's speed reaches them alike)."""
    spent = {name: instrument(c) for name, c in contenders.items()}
    for c in contenders.values():
        c.chunk(2000)
    best: dict[str, tuple[float, float, float]] = {}
    for name in interleaved(list(contenders), rounds):
        spent[name]["env"] = spent[name]["act"] = 0
        t = time.perf_counter_ns()
        done, _ = contenders[name].chunk(steps)
        total = time.perf_counter_ns() - t
        lockstep = done / NUM_ENVS * 1e3
        run = (total / lockstep, spent[name]["env"] / lockstep, spent[name]["act"] / lockstep)
        best[name] = min(best.get(name, run), run)
    return best


def main() -> None:
    configure_threads(1)
    ops = graph_ops()
    print(f"traced CartPole act graph, batch {NUM_ENVS}: {len(ops)} aten ops")
    for op in ops:
        print(f"    {op}")
    contenders = sampling_overhead.make_contenders("torch", "cartpole", NUM_ENVS)
    try:
        names = ("direct", "worker_hand", "worker_traced")
        best = split({name: contenders[name] for name in names})
        print(f"\nper lockstep step of {NUM_ENVS} CartPole envs, us (fastest of 7 interleaved rounds): "
              f"total = env + act + rest")
        for name in names:
            total, env, act = best[name]
            print(f"    {name:14s} total {total:6.1f}  env {env:6.1f}  act {act:5.1f}  rest {total - env - act:5.1f}")
    finally:
        for contender in contenders.values():
            contender.close()


if __name__ == "__main__":
    main()
