"""API methods replayed from their recorded ops (`GraphExecutor(replay=True)`, the default; `execution.replay`).

On PyTorch a method that records no gradients runs its chain eagerly on its first two calls per input shapes,
recording the PyTorch calls, and from then on a flat function of those calls
(`harness.backends.torch.replay`). It must give what the eager chain gives, random draws and writes included,
read the variables live, and refuse (run the eager chain) where a recording would freeze a value read out of
a tensor, state kept between calls, or a tensor made outside the functions a recording sees.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch

from harness.backends.torch import replay as replay_module
from harness.execution.executor import GraphExecutor
from harness.graph import Component, api, graph_fn
from harness.graph.errors import UnknownApiError
from harness.spaces import Dict, FloatBox, parse
from reference_agents.agents import DQNAgent
from spacegraph.reports.sampling_overhead import comparable_config
from suites.execution.test_traced_apis import Noisy as TracedNoisy

X = parse("float32[B,3]")


class Noisy(TracedNoisy):
    """`test_traced_apis.Noisy` (``act``: ``x @ w`` plus uniform noise, and its argmax, optionally branching on a
    value; ``count`` adds one to a counter variable), ``act`` optionally perturbed in ways a replay must refuse;
    ``grad`` records gradients; ``pair`` takes a container."""

    def __init__(self, branch_on_value: bool = False, python_state: bool = False, numpy_noise: bool = False):
        super().__init__(branch_on_value)
        self.python_state, self.numpy_noise = python_state, numpy_noise
        self.calls_seen = 0
        self.rng = np.random.default_rng(0)

    @api
    def act(self, x):
        return self._graph_fn_perturb(self._graph_fn_act(x))

    @api
    def grad(self, x):
        return self._graph_fn_grad(x)

    @api
    def pair(self, xy):
        return self._graph_fn_pair(xy)

    @graph_fn
    def _graph_fn_perturb(self, F, acted):
        y = acted[1]
        if self.python_state:  # state kept between calls, in Python
            self.calls_seen += 1
            y = y + float(self.calls_seen)
        if self.numpy_noise:  # a tensor made outside PyTorch's functions on every call
            y = y + torch.from_numpy(self.rng.normal(size=2).astype(np.float32))
        return F.argmax(y, -1), y

    @graph_fn(gradients=True)
    def _graph_fn_grad(self, F, x):
        return F.gradients(F.reduce_sum(F.square(F.matmul(x, self.w))), [self.w])[0]

    @graph_fn(flatten=True)
    def _graph_fn_pair(self, F, xy):
        return xy["a"] + xy["b"]


SPACES = {"x": X, "xy": Dict(a=FloatBox((3,), batch_rank=True), b=FloatBox((3,), batch_rank=True))}


def batches(rng, sizes=(1, 3, 1, 5, 3, 1, 3)):
    return [rng.normal(size=(n, 3)).astype(np.float32) for n in sizes]


def both(seed=5, **kwargs):
    return (GraphExecutor(Noisy(**kwargs), SPACES, backend="torch", seed=seed, replay=False),
            GraphExecutor(Noisy(**kwargs), SPACES, backend="torch", seed=seed))


def test_replayed_method_gives_the_eager_outputs_and_draws_and_reads_variables_live():
    eager, replayed = both()
    rng = np.random.default_rng(0)
    for i, x in enumerate(batches(rng) * 2 + batches(rng, (4,))):
        if i == 7:  # in-place weight changes must reach the replay (it holds the variable, not a copy)
            w = {"noisy/w": rng.normal(size=(3, 2)).astype(np.float32), "noisy/calls": np.int64(5)}
            eager.set_weights(w)
            replayed.set_weights(w)
        (a1, y1), (a2, y2) = eager.execute("act", x), replayed.execute("act", x)
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(y1, y2)
    state = replayed.replayed("act")
    assert state.refused is None
    assert sorted(k[0][0] for k in state.replays) == [1, 3, 5]   # not 4: called once
    source = next(iter(state.sources.values()))
    assert "# matmul" in source and "# rand" in source and "# argmax" in source
    assert eager.replayed("act") is None


def test_the_second_call_of_a_shape_is_recorded_and_the_third_replayed(monkeypatch):
    _, replayed = both()
    state = replayed.replayed("act")
    runs = []
    chain = state.chain
    state.chain = lambda *args: runs.append(1) or chain(*args)
    x = np.ones((2, 3), np.float32)
    for expected_runs, expected_replays in ((1, 0), (2, 1), (2, 1), (2, 1)):
        replayed.execute("act", x)
        assert (len(runs), len(state.replays)) == (expected_runs, expected_replays)


def test_writes_are_replayed_too():
    eager, replayed = both()
    x = np.ones((2, 3), np.float32)
    for _ in range(6):
        eager.execute("count", x)
        replayed.execute("count", x)
    assert replayed.replayed("count").replays
    assert int(replayed.get_weights()["noisy/calls"]) == int(eager.get_weights()["noisy/calls"]) == 6


@pytest.mark.parametrize("kind, reason", [
    ("branch_on_value", r"reads a value out of a tensor \(__bool__\)"),
    ("python_state", r"recorded different programs"),
    ("numpy_noise", r"recorded different programs"),
])
def test_a_recording_that_would_freeze_a_value_is_refused_and_the_method_stays_eager(kind, reason):
    eager, replayed = both(**{kind: True})
    rng = np.random.default_rng(2)
    for x in batches(rng) * 2:
        (a1, y1), (a2, y2) = eager.execute("act", x), replayed.execute("act", x)
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(y1, y2)
    state = replayed.replayed("act")
    assert state.replays == {}
    assert state.refused is not None and re.search(reason, state.refused), state.refused


def test_shapes_past_the_cap_run_the_eager_chain(monkeypatch):
    monkeypatch.setattr(replay_module, "MAX_REPLAYS", 2)
    eager, replayed = both()
    rng = np.random.default_rng(1)
    for x in batches(rng, (1, 1, 2, 2, 3, 3, 3, 1)):
        (a1, y1), (a2, y2) = eager.execute("act", x), replayed.execute("act", x)
        np.testing.assert_array_equal(y1, y2)
    assert sorted(k[0][0] for k in replayed.replayed("act").replays) == [1, 2]


def test_only_methods_without_gradients_or_containers_replay_and_tf_replays_nothing():
    _, replayed = both()
    assert replayed.replayed("grad") is None
    assert replayed.replayed("pair") is None
    traced = GraphExecutor(Noisy(), SPACES, backend="torch", seed=5, trace=["act"])
    assert traced.replayed("act") is None and traced.replayed("count") is not None
    tf = GraphExecutor(Noisy(), SPACES, backend="tf", seed=5)
    assert tf.replayed("act") is None
    with pytest.raises(UnknownApiError, match="no built API method 'nope'"):
        replayed.replayed("nope")
    with pytest.raises(TypeError, match="replay must be a bool; got 'yes'"):
        GraphExecutor(Noisy(), SPACES, backend="torch", replay="yes")


def test_a_value_shaped_tensor_whose_shape_is_read_is_refused():
    class Positives(Component):
        def __init__(self):
            super().__init__(scope="positives")

        @api
        def count(self, x):
            return self._graph_fn_count(x)

        @graph_fn
        def _graph_fn_count(self, F, x):
            return F.fill([1], 0.0, "float32")

        @_graph_fn_count.torch
        def _count_torch(self, F, x):
            picked = x[x > 0.0]        # its shape depends on the values
            return torch.full((1,), float(picked.shape[0]))

    ex = GraphExecutor(Positives(), {"x": X}, backend="torch", seed=0)
    rng = np.random.default_rng(3)
    for _ in range(4):
        x = rng.normal(size=(4, 3)).astype(np.float32)
        assert float(ex.execute("count", x)[0]) == float((x > 0).sum())
    assert "shape of a tensor whose shape depends on values" in ex.replayed("count").refused


def test_the_dqn_act_replays_with_the_eager_draws_and_the_config_can_switch_it_off():
    config = comparable_config("cartpole")
    replayed = DQNAgent(config, backend="torch", seed=3)
    config = copy.deepcopy(config)
    config.setdefault("execution", {})["replay"] = False
    eager = DQNAgent(config, backend="torch", seed=3)
    states = replayed.state_space.with_batch_rank().sample(size=4, rng=0)
    for i in range(20):
        np.testing.assert_array_equal(replayed.get_actions(states[: 1 + i % 4]), eager.get_actions(states[: 1 + i % 4]))
    assert replayed.executor.replayed("act").replays and eager.executor.replayed("act") is None


def test_a_host_step_is_replayed_as_one_call_and_still_runs_on_the_host():
    class Half(Component):
        def __init__(self):
            super().__init__(scope="half")
            self.ran_with = []

        @api
        def apply(self, t):
            return self._graph_fn_apply(t)

        @graph_fn
        def _graph_fn_apply(self, F, t):
            self.ran_with.append(F.name)
            return F.cast(t, "float32") * 0.5

    comp = Half()
    ex = GraphExecutor(comp, {"t": parse("int64[]")}, backend="torch", seed=3)
    assert ex.profile.host_steps == 1
    comp.ran_with.clear()
    for t in (3, -8, 5, 1001):
        out = ex.execute("apply", np.int64(t))
        assert out.dtype == np.float32 and out == t * 0.5
    assert comp.ran_with == ["host"] * 4
    state = ex.replayed("apply")
    assert state.refused is None and len(state.replays) == 1
    source = next(iter(state.sources.values()))
    assert source.count(" = _f") == 1 and "# on_host" in source, source   # one call: the host step


def test_nothing_is_replayed_while_torch_distributed_is_initialized(monkeypatch):
    # a collective inside a graph function is no PyTorch function a recording sees: a replay would skip it
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    eager, replayed = both()
    x = np.ones((2, 3), np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(eager.execute("act", x)[1], replayed.execute("act", x)[1])
    state = replayed.replayed("act")
    assert state.replays == {} and "torch.distributed is initialized" in state.refused
