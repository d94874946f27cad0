"""Which part of the eager PyTorch act's Python costs inside a CartPole worker: the steps or the op namespace.

    OMP_NUM_THREADS=1 python reports/profiles/scripts/act_inlining.py [N] [SECONDS] [ROUNDS]

The worker (`sampling_contenders.WorkerContender`, not observing) over N environments acting four ways,
against the hand-written loop (`DirectLoopContender`), as `sampling_overhead` measures it (interleaved rounds
of process CPU time; printed: us per lockstep step, median over rounds, and the median per-round ratio to the
loop):

- ``chain``: the agent's act step by step (``execution.replay: false``): the generated chain calls six
  graph-function steps, which call the op namespace (`TorchOps`), which calls PyTorch;
- ``bodies inlined``: the same agent with its act's chain replaced by the six graph functions' bodies written
  out in one function, still calling the op namespace (``F.dense``, ``F.random_bernoulli``, ...): what inlining
  the chain's steps would give;
- ``flat``: the same function calling PyTorch directly, as the op namespace's methods do for these arguments;
- ``replay``: the agent as built by default, its act replayed from its recorded PyTorch calls
  (`harness.backends.torch.replay`), which reaches the flat form without anyone writing it.

Each replaced act is checked first to give the chain's actions from the same generator state. What it showed
on the AMD host (1 env, 6 rounds of 5 s): with the first, hand-made version of this script, before the
replays, chain 0.808, bodies inlined 0.816, flat 0.902; with this script at ``b7d1891``, chain 0.804 (130 us a
step), bodies inlined 0.812 (128), flat 0.872 (121), replay 0.891 (118), loop 104 us. The steps cost almost
nothing; the op namespace's methods most of the gap; the replay reaches the flat form.
"""

import sys

from harness.measure.machine import configure_threads


def _chain_cell(agent):
    """The closure cell of the agent's compiled ``act`` holding the chain it runs (a first call compiles it)."""
    states = agent.state_space.with_batch_rank().sample(size=1, rng=0)
    agent.get_actions(states)
    compiled = agent.executor.graph.apis["act"].fn
    return dict(zip(compiled.__code__.co_freevars, compiled.__closure__))["fn"]


def _replace_act(agent, flat: bool) -> None:
    """Replaces the act's chain (six steps: dense_0, value, advantage, the dueling combination, argmax, explore)
    with their bodies written out, on the op namespace (``flat=False``) or on PyTorch directly."""
    import numpy as np
    import torch

    cell = _chain_cell(agent)
    chain = cell.cell_contents
    steps = [chain.__globals__[f"_s{i}"] for i in range(6)]
    hidden, value, advantage, _, _, explore = (step.args[0] for step in steps)
    F, epsilon = steps[0].args[1], chain.__globals__["_c6"]
    if flat:
        gen, eps, n_actions = F._gen, float(epsilon), int(explore.num_actions)

        def act(states, time_step):
            h = torch.relu(torch.addmm(hidden.bias, states, hidden.kernel))
            v = torch.addmm(value.bias, h, value.kernel)
            a = torch.addmm(advantage.bias, h, advantage.kernel)
            greedy = torch.argmax(v + a - torch.mean(a, dim=-1, keepdim=True), dim=-1)
            n = greedy.shape[0]
            coins = torch.empty((n,), dtype=torch.bool).bernoulli_(eps, generator=gen)
            drawn = torch.randint(0, n_actions, (n,), generator=gen, dtype=torch.int64)
            return torch.where(coins, drawn, greedy)
    else:
        def dense(layer, x):
            out = F.dense(x, layer.kernel, layer.bias if layer.use_bias else None)
            if layer.activation is None or layer.activation == "linear":
                return out
            return F.activation(layer.activation)(out)

        def act(states, time_step):
            h = dense(hidden, states)
            v, a = dense(value, h), dense(advantage, h)
            greedy = F.argmax(v + a - F.reduce_mean(a, axis=-1, keepdims=True), axis=-1)
            shape = [F.dim(greedy, 0)]
            coins = F.random_bernoulli(shape, epsilon)
            drawn = F.random_integers(shape, explore.num_actions, "int64")
            return F.where(coins, drawn, greedy)
    # the same generator state through the chain and the replacement: the same actions, draws included
    probe = torch.from_numpy(agent.state_space.with_batch_rank().sample(size=64, rng=1))
    state = F._gen.get_state()
    with torch.inference_mode():
        expected = chain(probe, torch.tensor(0))
        F._gen.set_state(state)
        np.testing.assert_array_equal(act(probe, torch.tensor(0)).numpy(), expected.numpy())
    cell.cell_contents = act


def main(num_envs: int = 1, seconds: float = 5.0, rounds: int = 6) -> dict[str, float]:
    """``{contender: median per-round ratio to the loop}``, printed with us per step."""
    from reference_agents.agents import DQNAgent
    from spacegraph.reports import sampling_contenders as sc
    from spacegraph.reports import sampling_overhead as so
    from sampling_variants import time_against_loop   # beside this script

    configure_threads(1)
    agents = {"chain": DQNAgent(so.eager_config("cartpole"), backend="torch", seed=0),
              "bodies inlined": DQNAgent(so.eager_config("cartpole"), backend="torch", seed=0),
              "flat": DQNAgent(so.eager_config("cartpole"), backend="torch", seed=0),
              "replay": DQNAgent(so.comparable_config("cartpole"), backend="torch", seed=0)}
    _replace_act(agents["bodies inlined"], flat=False)
    _replace_act(agents["flat"], flat=True)
    factory = sc.env_factory(so.comparable_config("cartpole"))
    contenders = {"loop": sc.DirectLoopContender(agents["chain"], factory, num_envs)}
    contenders.update({name: sc.WorkerContender(agent, factory, num_envs, observe=False, timed=False)
                       for name, agent in agents.items()})
    return time_against_loop(contenders, num_envs, seconds * rounds, rounds)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1, float(sys.argv[2]) if len(sys.argv) > 2 else 5.0,
         int(sys.argv[3]) if len(sys.argv) > 3 else 6)
