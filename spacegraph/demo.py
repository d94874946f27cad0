"""`spacegraph demo`: spaces, the DQN Q-network graph on both backends, and a short DQN training run on each."""

from __future__ import annotations

import math
import time

import numpy as np

DEMO_LAYERS = [{"type": "dense", "units": 32, "activation": "relu"}]


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
    from reference_agents.agents import QNetwork

    spaces = {"states": FloatBox(4, batch_rank=True)}
    states = spaces["states"].sample(8, rng=2)
    outputs, weights = {}, {}
    for backend in backends:
        _section(f"Q-network on {backend}")
        executor = GraphExecutor(QNetwork(DEMO_LAYERS, 2), spaces, backend=backend, seed=7)
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
        other = GraphExecutor(QNetwork(DEMO_LAYERS, 2), spaces, backend=b, seed=123)
        other.set_weights(weights[a])
        diff = float(np.max(np.abs(other.execute("q_values", states) - outputs[a])))
        print(f"{a} weights loaded into a {b} build with another seed: max diff {diff:.2e}")


def demo_training(backends: list[str], steps: int, seconds: float) -> None:
    """Trains DQN (``dqn_cartpole``) on CartPole briefly on each backend and prints a table."""
    from reference_agents.agents import build_agent
    from reference_agents.training import EvaluationProtocol, Trainer

    _section("DQN on CartPole-v1: a short run per backend")
    print(f"config dqn_cartpole, at most {steps:,} env steps or {seconds:g} s of training per backend, "
          f"then 5 greedy episodes")
    rows = []
    for backend in backends:
        start = time.perf_counter()
        agent = build_agent("dqn_cartpole", backend=backend, seed=0)
        build_s = time.perf_counter() - start
        # 5 greedy episodes at the end, no target: a demo run never calls itself solved (that takes the
        # config's protocol, a 100-episode mean, which `spacegraph train dqn_cartpole` applies).
        evaluation = EvaluationProtocol(every=steps, episodes=5, screen_episodes=None, target_return=None)
        trainer = Trainer(agent, None, evaluation=evaluation, max_seconds=seconds, progress=False)
        result = trainer.train(steps)
        last = result.history[-1]
        rows.append((backend, result.total_steps, result.steps_per_s, result.episodes, last["train_return_100"],
                     last["eval_return"], agent.updates, last["epsilon"], build_s + result.seconds))
        trainer.worker.close()
    header = ("backend", "steps", "steps/s", "episodes", "return(100)", "eval(5)", "updates", "epsilon", "seconds")
    print("  ".join(f"{h:>11}" for h in header))
    for backend, n, rate, episodes, ret, ev, updates, eps, secs in rows:
        cells = (backend, f"{n:,}", f"{rate:,.0f}", f"{episodes:,}", "-" if math.isnan(ret) else f"{ret:.1f}",
                 f"{ev:.1f}", f"{updates:,}", f"{eps:.2f}", f"{secs:.1f}")
        print("  ".join(f"{c:>11}" for c in cells))
    print("A demo, not a solved run: CartPole counts as solved at a mean return of 475; "
          "`spacegraph train dqn_cartpole` trains the whole schedule.")


def run_demo(backends: list[str] | None = None, train_steps: int = 4000, train_seconds: float = 15.0) -> int:
    """Runs the demo; returns the exit code.

    Args:
        backends: the backends to show (default both).
        train_steps: env steps of DQN training per backend (0 skips the training part).
        train_seconds: the most seconds of training per backend.
    """
    from reference_agents.training import set_framework_threads

    start = time.perf_counter()
    backends = backends or ["tf", "torch"]
    for backend in backends:  # before either framework runs anything (TF accepts it only then)
        set_framework_threads(backend, 1)
    demo_spaces()
    demo_graph(backends)
    if train_steps:
        demo_training(backends, train_steps, train_seconds)
    print(f"\ndemo finished in {time.perf_counter() - start:.1f} s")
    return 0
