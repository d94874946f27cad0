"""API methods run as a recorded graph per input shapes (`GraphExecutor(trace=...)`, `execution.trace` of an agent).

On PyTorch a traced method is a TorchScript graph per input shapes (`harness.backends.torch.tracing`); it
must give what the eager chain gives, random draws included, read the variables live, and refuse a method
whose graph would freeze a value read out of a tensor. On TF it changes nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api, graph_fn
from harness.graph.errors import BuildError
from harness.spaces import Dict, FloatBox, parse
from reference_agents.agents import ConfigError, DQNAgent
from spacegraph.reports.sampling_overhead import comparable_config

X = parse("float32[B,3]")


class Noisy(Component):
    """``x @ w`` plus uniform noise and its argmax; ``count`` assigns a counter variable."""

    def __init__(self, branch_on_value: bool = False):
        super().__init__(scope="noisy")
        self.branch_on_value = branch_on_value

    def create_variables(self, input_spaces):
        self.w = self.get_variable("w", (3, 2), initializer="ones")
        self.calls = self.get_variable("calls", (), dtype="int64", initializer=np.int64(0))

    @api
    def act(self, x):
        return self._graph_fn_act(x)

    @api
    def count(self, x):
        return self._graph_fn_count(x)

    @graph_fn
    def _graph_fn_act(self, F, x):
        y = F.matmul(x, self.w) + F.random_uniform([F.dim(x, 0), 2])
        if self.branch_on_value and bool(F.reduce_sum(x) > 0.0):  # a Python branch on a tensor's value
            y = y * 2.0
        return F.argmax(y, -1), y

    @graph_fn
    def _graph_fn_count(self, F, x):
        F.assign(self.calls, self.calls + 1)
        return x * 1.0


def batches(rng, sizes=(1, 3, 1, 5, 3)):
    return [rng.normal(size=(n, 3)).astype(np.float32) for n in sizes]


def test_traced_method_gives_the_eager_outputs_and_draws_and_reads_variables_live():
    eager = GraphExecutor(Noisy(), {"x": X}, backend="torch", seed=5)
    traced = GraphExecutor(Noisy(), {"x": X}, backend="torch", seed=5, trace=["act"])
    rng = np.random.default_rng(0)
    for i, x in enumerate(batches(rng) * 2):
        if i == 5:  # in-place weight changes must reach the traced graph (it holds the variable, not a copy)
            w = {"noisy/w": rng.normal(size=(3, 2)).astype(np.float32), "noisy/calls": np.int64(5)}
            eager.set_weights(w)
            traced.set_weights(w)
        (a1, y1), (a2, y2) = eager.execute("act", x), traced.execute("act", x)
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(y1, y2)
    traced_api = traced.apis["act"].fn.__wrapped__
    assert sorted(k[0][0][0] for k in traced_api.graphs) == [1, 3, 5]  # one trace per input shapes


def test_shapes_past_the_trace_cap_run_eagerly_with_one_warning(monkeypatch):
    from harness.backends.torch import tracing

    monkeypatch.setattr(tracing, "MAX_TRACES", 2)
    eager = GraphExecutor(Noisy(), {"x": X}, backend="torch", seed=5)
    traced = GraphExecutor(Noisy(), {"x": X}, backend="torch", seed=5, trace=["act"])
    rng = np.random.default_rng(1)
    xs = batches(rng, (1, 2, 3, 4, 3))
    with pytest.warns(RuntimeWarning, match=r"'act': 2 input shapes traced already; calls with further shapes "
                                            r"\(now \[3, 3\]\) run the eager chain") as caught:
        for x in xs:
            (a1, y1), (a2, y2) = eager.execute("act", x), traced.execute("act", x)
            np.testing.assert_array_equal(a1, a2)
            np.testing.assert_array_equal(y1, y2)
    assert len([w for w in caught if "input shapes traced already" in str(w.message)]) == 1
    assert sorted(k[0][0][0] for k in traced.apis["act"].fn.__wrapped__.graphs) == [1, 2]


class Learner(Component):
    """``act``: ``x @ w`` (calling ``hook`` when set: it then runs while the act records a trace);
    ``grad``: d sum((x @ w)^2) / dw."""

    def __init__(self):
        super().__init__(scope="learner")
        self.hook = None

    def create_variables(self, input_spaces):
        self.w = self.get_variable("w", (3, 2), initializer=np.arange(6, dtype=np.float32).reshape(3, 2) / 6)

    @api
    def act(self, x):
        return self._graph_fn_act(x)

    @api
    def grad(self, x):
        return self._graph_fn_grad(x)

    @graph_fn
    def _graph_fn_act(self, F, x):
        if self.hook is not None:
            self.hook()
        return F.matmul(x, self.w)

    @graph_fn(gradients=True)
    def _graph_fn_grad(self, F, x):
        return F.gradients(F.reduce_sum(F.square(F.matmul(x, self.w))), [self.w])[0]


def test_a_warning_raised_while_a_trace_is_recorded_reaches_the_caller():
    # The recording catches warnings to find the tracer's own; a graph function's (a user's) must go on.
    import warnings

    learner = Learner()
    executor = GraphExecutor(learner, {"x": X}, backend="torch", seed=0, trace=["act"])
    learner.hook = lambda: warnings.warn("the user's own warning", UserWarning)
    with pytest.warns(UserWarning, match="the user's own warning"):
        executor.execute("act", np.ones((6, 3), np.float32))  # a new batch size: recorded now


def test_a_gradient_call_in_another_thread_waits_for_a_trace_being_recorded():
    # Recording switches the variables' requires_grad off: a gradient call running meanwhile would get
    # zeros. It must wait for the recording instead, and then see its variables as they were.
    import threading

    learner = Learner()
    executor = GraphExecutor(learner, {"x": X}, backend="torch", seed=0, trace=["act"])
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    w = np.arange(6, dtype=np.float32).reshape(3, 2) / 6
    expected = 2.0 * x.T @ (x @ w)
    got, finished_while_recording = [], []

    def hook():
        learner.hook = None
        other = threading.Thread(target=lambda: got.append(executor.execute("grad", x)))
        other.start()
        other.join(timeout=1.0)
        finished_while_recording.append(not other.is_alive())
        hook.thread = other

    learner.hook = hook
    executor.execute("act", rng.normal(size=(7, 3)).astype(np.float32))  # a new batch size: recorded now
    hook.thread.join(timeout=30)
    assert finished_while_recording == [False], "the gradient call ran while the trace was being recorded"
    np.testing.assert_allclose(got[0], expected, rtol=1e-5)


def test_a_method_that_assigns_a_variable_is_refused_at_build_and_the_check_leaves_no_trace():
    # TorchScript drops a write to a variable no output depends on: traced, `count` would stop counting
    with pytest.raises(BuildError, match=r"API method 'count' cannot be traced: it changes a tensor in place"):
        GraphExecutor(Noisy(), {"x": X}, backend="torch", seed=5, trace=["count"])
    ex = GraphExecutor(Noisy(), {"x": X}, backend="torch", seed=5, trace=["act"])
    assert ex.get_weights()["noisy/calls"] == 0    # the build's trace check ran inside its undone sample runs
    eager = GraphExecutor(Noisy(), {"x": X}, backend="torch", seed=5)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(ex.execute("act", x)[1], eager.execute("act", x)[1])  # the generator reset too


def test_a_graph_that_branches_on_a_tensor_value_is_refused_at_build_with_the_method_named():
    with pytest.raises(BuildError, match=r"API method 'act' cannot be traced: a graph function branches"):
        GraphExecutor(Noisy(branch_on_value=True), {"x": X}, backend="torch", seed=5, trace=["act"])


class ReadsAValue(Component):
    """Repeats a row as often as the input's first element says: a size read from data."""

    def __init__(self):
        super().__init__(scope="reads")

    @api
    def repeat(self, n):
        return self._graph_fn_repeat(n)

    @graph_fn
    def _graph_fn_repeat(self, F, n):
        return F.zeros([int(n[0]) + 1, 2])


def test_a_graph_that_freezes_a_value_read_from_a_tensor_is_refused():
    with pytest.raises(BuildError, match=r"API method 'repeat' cannot be traced: its recorded graph differs"):
        GraphExecutor(ReadsAValue(), {"n": parse("int64[B](0,1000)")}, backend="torch", seed=0, trace=["repeat"])
    assert GraphExecutor(ReadsAValue(), {"n": parse("int64[B](0,1000)")}, backend="torch", seed=0
                         ).execute("repeat", np.array([2], np.int64)).shape == (3, 2)


@pytest.mark.parametrize("trace, match", [(["nope"], r"trace: no built API method 'nope'"),
                                          (["update"], r"API method 'update' records gradients")])
def test_trace_names_built_methods_that_record_no_gradients(trace, match):
    class Fit(Component):
        def __init__(self):
            super().__init__(scope="fit")

        def create_variables(self, input_spaces):
            self.w = self.get_variable("w", (3,), initializer="ones")

        @api
        def update(self, x):
            return self._graph_fn_update(x)

        @graph_fn(gradients=True)
        def _graph_fn_update(self, F, x):
            loss = F.reduce_sum(F.matmul(x, F.reshape(self.w, [3, 1])))
            (g,) = F.gradients(loss, [self.w])
            F.assign(self.w, self.w - 0.1 * g)
            return loss

    with pytest.raises(BuildError, match=match):
        GraphExecutor(Fit(), {"x": X}, backend="torch", trace=trace)


class Pick(Component):
    """``apply(obs)``: the ``a`` entry of a container argument, doubled."""

    def __init__(self):
        super().__init__(scope="pick")

    @api
    def apply(self, obs):
        return self._graph_fn_apply(obs)

    @graph_fn
    def _graph_fn_apply(self, F, obs):
        return obs["a"] * 2.0


def test_a_method_with_a_container_argument_is_refused_at_build():
    spaces = {"obs": Dict(a=FloatBox(2, batch_rank=True), b=FloatBox(2, batch_rank=True))}
    with pytest.raises(BuildError, match=r"API method 'apply' takes a container argument 'obs'"):
        GraphExecutor(Pick(), spaces, backend="torch", trace=["apply"])


def test_trace_changes_nothing_on_tf():
    eager = GraphExecutor(Noisy(), {"x": X}, backend="tf", seed=5)
    traced = GraphExecutor(Noisy(), {"x": X}, backend="tf", seed=5, trace=["act"])
    for x in batches(np.random.default_rng(1)):
        np.testing.assert_array_equal(eager.execute("act", x)[1], traced.execute("act", x)[1])


def test_dqn_agent_traced_act_matches_eager_along_a_linear_schedule():
    cfg = comparable_config("cartpole")
    cfg["exploration"] = {"type": "linear", "from": 1.0, "to": 0.1, "steps": 40}
    eager = DQNAgent(cfg, backend="torch", seed=0)
    traced = DQNAgent({**cfg, "execution": {"trace": ["act"]}}, backend="torch", seed=0)
    assert "_graph_fn_epsilon (host)" in eager.executor.apis["act"].source      # a host step eagerly ...
    assert "(host)" not in traced.executor.apis["act"].source                   # ... in the graph when traced
    rng = np.random.default_rng(2)
    for t in range(0, 60, 3):
        states = eager.state_space.with_batch_rank().sample(size=int(rng.integers(1, 4)), rng=rng)
        np.testing.assert_array_equal(eager.executor.execute("act", states, np.int64(t)),
                                      traced.executor.execute("act", states, np.int64(t)))


def test_dqn_config_names_an_unknown_traced_method_by_key_path():
    cfg = {**comparable_config("cartpole"), "execution": {"trace": ["acting"]}}
    with pytest.raises(ConfigError, match=r"execution\.trace.*no API method\(s\) \['acting'\]"):
        DQNAgent(cfg, backend="torch", seed=0)


class Conv(Component):
    """A 3x3 convolution of ``float32[B,6,6,2]`` images, summed per image."""

    def __init__(self):
        super().__init__(scope="conv")

    def create_variables(self, input_spaces):
        self.kernel = self.get_variable("kernel", (3, 3, 2, 4), initializer="ones")

    @api
    def apply(self, images):
        return self._graph_fn_apply(images)

    @graph_fn
    def _graph_fn_apply(self, F, images):
        return F.reduce_sum(F.conv2d(images, self.kernel), [1, 2, 3])


def test_a_traced_convolution_reads_its_kernel_live():
    # Eagerly, a kernel keeps an OIHW copy between calls (`ops._oihw`); a trace holding that copy would go on
    # reading it after the kernel changed.
    spaces = {"images": parse("float32[B,6,6,2]")}
    eager = GraphExecutor(Conv(), spaces, backend="torch")
    traced = GraphExecutor(Conv(), spaces, backend="torch", trace=["apply"])
    rng = np.random.default_rng(3)
    images = rng.normal(size=(2, 6, 6, 2)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(traced.execute("apply", images), eager.execute("apply", images), rtol=1e-5)
        kernel = {"conv/kernel": rng.normal(size=(3, 3, 2, 4)).astype(np.float32)}
        eager.set_weights(kernel)
        traced.set_weights(kernel)
