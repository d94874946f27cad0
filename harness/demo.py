"""`spacegraph demo`: spaces, a component graph on both backends, and what a user wants to see."""

from __future__ import annotations

import time

import numpy as np

from harness.graph import Component, api


class QNetwork(Component):
    """A small MLP Q-network: two Dense layers (a stand-in until the DQN issue lands)."""

    def __init__(self, hidden: int = 32, actions: int = 2, scope: str = "q-net") -> None:
        from reference_agents.components.common import Dense

        super().__init__(Dense(hidden, activation="relu", scope="hidden"), Dense(actions, scope="q-values"),
                         scope=scope)

    @api
    def q_values(self, states):
        """Q-values for a batch of states."""
        hidden = self.sub_components["hidden"].apply(states)
        return self.sub_components["q-values"].apply(hidden)


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def demo_spaces() -> None:
    import ale_py
    import gymnasium as gym

    from harness.spaces import Dict, FloatBox, IntBox, from_gymnasium, parse

    _section("spaces")
    pong = parse("uint8[B,84,84,4]")
    batch = pong.sample(32, rng=0)
    print(f"Pong frames       {pong!r}: sample of 32 -> {batch.shape} {batch.dtype}, contained: {pong.contains(batch)}")
    obs = Dict(pos=FloatBox(3, low=-1.0, high=1.0), lives=IntBox(4), frames=parse("uint8[84,84]")).with_batch_rank()
    print(f"nested            {obs!r}")
    value = obs.sample(4, rng=1)
    print(f"  key paths       {list(obs.flatten())}")
    print(f"  sample shapes   { {k: v.shape for k, v in obs.flatten_value(value).items()} }")
    value["pos"][2, 1] = 1.5
    print(f"  why not         {obs.why_not(value)}")
    gym.register_envs(ale_py)
    for env_id in ("CartPole-v1", "ALE/Pong-v5"):
        env = gym.make(env_id)
        print(f"{env_id:<17} observations {from_gymnasium(env.observation_space)!r}, "
              f"actions {from_gymnasium(env.action_space)!r}")
        env.close()


def demo_graph(backends: list[str]) -> None:
    from harness.execution.executor import GraphExecutor
    from harness.spaces import FloatBox

    spaces = {"states": FloatBox(4, batch_rank=True)}
    states = spaces["states"].sample(8, rng=2)
    outputs, weights = {}, {}
    for backend in backends:
        _section(f"Q-network on {backend}")
        executor = GraphExecutor(QNetwork(), spaces, backend=backend, seed=7)
        print(executor.api_table())
        p = executor.profile
        print(f"build: assembly {p.assembly * 1e3:.1f} ms, framework overhead {p.framework_overhead * 1e3:.1f} ms, "
              f"variables {p.variable_creation * 1e3:.1f} ms, ops {p.op_creation * 1e3:.1f} ms")
        print("flat call chain:\n" + executor.apis["q_values"].source.rstrip())
        outputs[backend] = executor.execute("q_values", states)
        weights[backend] = executor.get_weights()
        print(f"q_values(8 states) -> {outputs[backend].shape}; first row {np.round(outputs[backend][0], 4)}")
    if len(backends) == 2:
        _section("cross-backend")
        a, b = backends
        diff = float(np.max(np.abs(outputs[a] - outputs[b])))
        print(f"same seed, same weights: max |{a} - {b}| = {diff:.2e}")
        other = GraphExecutor(QNetwork(), spaces, backend=b, seed=123)
        other.set_weights(weights[a])
        diff = float(np.max(np.abs(other.execute("q_values", states) - outputs[a])))
        print(f"{a} weights loaded into a {b} build with another seed: max diff {diff:.2e}")


def run_demo(backends: list[str] | None = None) -> int:
    """Runs the demo; returns the exit code."""
    start = time.perf_counter()
    demo_spaces()
    demo_graph(backends or ["tf", "torch"])
    print(f"\ndemo finished in {time.perf_counter() - start:.1f} s")
    return 0
