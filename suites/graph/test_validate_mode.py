"""Validate mode (`GraphExecutor(validate=...)`), `set_weights(strict=False)`, and the text of every error the
graph and the executor raise (no ``?`` or ``<...>`` placeholders)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.execution.inputs import VALIDATE_ENV, default_validate
from harness.graph import Component, ExecutionError, SpacegraphError, api, graph_fn
from harness.graph.errors import InputValidationError
from harness.spaces import BoolBox, Dict, FloatBox, IntBox


class Probe(Component):
    """One-hots a discrete action (TF gives zeros for an out-of-range index, PyTorch raises), scales a
    bounded float by it, and counts the true terminals."""

    def __init__(self, scope="probe"):
        super().__init__(scope=scope)

    @api
    def apply(self, obs, action, terminal):
        return self._graph_fn_apply(obs, action, terminal)

    @graph_fn
    def _graph_fn_apply(self, F, obs, action, terminal):
        hot = F.one_hot(action, 3)
        return (F.reduce_sum(obs["x"], axis=-1, keepdims=True) * hot
                + F.expand_dims(F.cast(terminal, "float32") + F.cast(obs["n"], "float32"), -1))


SPACES = {"obs": Dict(x=FloatBox(2, low=0.0, high=1.0, batch_rank=True), n=IntBox(low=0, high=9, dtype="int32",
                                                                                     batch_rank=True)),
          "action": IntBox(3, batch_rank=True), "terminal": BoolBox(batch_rank=True)}


def good():
    return ({"x": np.full((2, 2), 0.5, np.float32), "n": np.array([1, 2], np.int32)},
            np.array([0, 2]), np.array([True, False]))


def with_(obs=None, action=None, terminal=None):
    o, a, t = good()
    return ({**o, **(obs or {})}, a if action is None else action, t if terminal is None else terminal)


#: (id, inputs, the message after "Probe 'probe': ")
VIOLATIONS = [
    ("discrete-range", with_(action=np.array([0, 3])),
     "apply(action): value 3 at index (1,) is above the upper bound 2 of space int64[B](0,2)"),
    ("discrete-negative", with_(action=np.array([-1, 0])),
     "apply(action): value -1 at index (0,) is below the lower bound 0 of space int64[B](0,2)"),
    ("float-for-int", with_(action=np.array([0.0, 1.0])),
     "apply(action): dtype float64 cannot be cast to int64 of space int64[B](0,2)"),
    ("int-for-float", with_(obs={"x": np.zeros((2, 2), np.int64)}),
     ("apply(obs/x): dtype int64 cannot be cast to float32 of space float32[B,2](0.0,1.0) "
      "(validate mode: NumPy int64 values are not cast to float32)")),
    ("bool-for-float", with_(obs={"x": np.zeros((2, 2), bool)}),
     "apply(obs/x): dtype bool cannot be cast to float32"),
    ("int-for-bool", with_(terminal=np.array([1, 0])),
     "apply(terminal): dtype int64 cannot be cast to bool of space bool[B]"),
    ("float-above-high", with_(obs={"x": np.array([[0.5, 0.5], [0.5, 1.5]], np.float32)}),
     "apply(obs/x): value 1.5 at index (1, 1) is above the upper bound 1.0 of space float32[B,2](0.0,1.0)"),
    ("nan", with_(obs={"x": np.array([[0.5, np.nan], [0.5, 0.5]], np.float32)}),
     "apply(obs/x): NaN at index (0, 1) is outside space float32[B,2](0.0,1.0)"),
    ("shape", with_(obs={"x": np.zeros((2, 3), np.float32)}),
     "apply(obs/x): shape (2, 3) does not fit space float32[B,2](0.0,1.0) (expected (None, 2))"),
    ("int64-overflows-int32", with_(obs={"n": np.array([1, 2 ** 40])}),
     "apply(obs/n): value 1099511627776 at index (1,) is above the upper bound 9 of space int32[B](0,9)"),
    ("int-range", with_(obs={"n": np.array([1, 10], np.int32)}),
     "apply(obs/n): value 10 at index (1,) is above the upper bound 9 of space int32[B](0,9)"),
    ("missing-key", ({"x": np.zeros((2, 2), np.float32)}, np.array([0, 1]), np.array([True, False])),
     "apply(obs): "),
]


@pytest.mark.parametrize("inputs, expected", [v[1:] for v in VIOLATIONS], ids=[v[0] for v in VIOLATIONS])
def test_values_outside_the_space_raise_the_same_error_on_both_backends(backends, inputs, expected):
    messages = {}
    for backend in backends:
        ex = GraphExecutor(Probe(), SPACES, backend=backend, validate=True)
        np.testing.assert_allclose(ex.execute("apply", *good()), [[3.0, 2.0, 2.0], [2.0, 2.0, 3.0]])
        with pytest.raises(InputValidationError) as info:
            ex.execute("apply", *inputs)
        assert isinstance(info.value, ExecutionError)
        assert info.value.method == "apply"
        messages[backend] = str(info.value)
        assert messages[backend].startswith("Probe 'probe': " + expected), messages[backend]
    assert len(set(messages.values())) == 1, messages  # identical text on every backend


def test_within_a_kind_values_are_converted_when_they_fit(backend):
    ex = GraphExecutor(Probe(), SPACES, backend=backend, validate=True)
    want = ex.execute("apply", *good())
    o, a, t = good()
    # int32 actions into int64, int64 counts into int32, float64 into float32 (the documented cast), Python lists
    np.testing.assert_allclose(ex.execute("apply", {"x": o["x"].astype(np.float64), "n": o["n"].astype(np.int64)},
                                          a.astype(np.int32), t), want)
    np.testing.assert_allclose(ex.execute("apply", {"x": o["x"].tolist(), "n": [1, 2]}, [0, 2], [True, False]), want)


def test_outside_validate_mode_inputs_are_cast_as_before(backend):
    ex = GraphExecutor(Probe(), SPACES, backend=backend, validate=False)
    assert not ex.validate
    o, a, t = good()
    out = ex.execute("apply", {"x": o["x"].astype(np.int64), "n": o["n"]}, a, t)  # cast silently, as before
    assert out.shape == (2, 3)
    with pytest.raises(ExecutionError) as info:  # float for int stays an error, not a validation one
        ex.execute("apply", o, a.astype(np.float64), t)
    assert not isinstance(info.value, InputValidationError)
    assert "Probe 'probe': apply(action): dtype float64 cannot be cast to int64" in str(info.value)


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("on", True), ("0", False), ("", False),
                                             (None, False)])
def test_validate_none_reads_the_process_default(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv(VALIDATE_ENV, raising=False)
    else:
        monkeypatch.setenv(VALIDATE_ENV, value)
    assert default_validate() is expected
    assert GraphExecutor(Probe(), SPACES, backend="torch", build=False).validate is expected
    assert GraphExecutor(Probe(), SPACES, backend="torch", build=False, validate=not expected).validate is not expected


# ---- set_weights -----------------------------------------------------------------------------------------


class Lin(Component):
    def __init__(self):
        super().__init__(scope="lin")

    def create_variables(self, input_spaces):
        self.kernel = self.get_variable("kernel", (2, 2), initializer="glorot_uniform")
        self.bias = self.get_variable("bias", (2,))

    @api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn
    def _graph_fn_apply(self, F, x):
        return F.matmul(x, self.kernel) + self.bias


def test_set_weights_is_strict_by_default_and_reports_ignored_keys(backend, caplog):
    ex = GraphExecutor(Lin(), {"x": FloatBox(2, batch_rank=True)}, backend=backend)
    w = ex.get_weights()
    typo = {"lin/kernel": w["lin/kernel"] + 1, "lin/bais": w["lin/bias"] + 1}
    with pytest.raises(ValueError, match=r"missing \['lin/bias'\], unexpected \['lin/bais'\]"):
        ex.set_weights(typo)
    assert ex.set_weights(w) == []
    with caplog.at_level(logging.WARNING, logger="harness.execution.executor"):
        ignored = ex.set_weights(typo, strict=False)
    assert ignored == ["lin/bais"]
    assert "lin/bais" in caplog.text and "ignored 1 key(s)" in caplog.text
    np.testing.assert_array_equal(ex.get_weights()["lin/kernel"], w["lin/kernel"] + 1)
    np.testing.assert_array_equal(ex.get_weights()["lin/bias"], w["lin/bias"])  # kept: it was misspelled


# ---- the text of every error -------------------------------------------------------------------------------

#: A placeholder or an internal repr in a message: `.?(`, a lone `?`, `'?'`, `<...>`-style object reprs.
PLACEHOLDER = re.compile(r"\.\?\(|\(\?\)|(^|\s)\?(\s|$|[,;:)])|'\?'|\"\?\"|<[\w.]+ (object )?at 0x|<Record\b|"
                         r"<function |<locals>|<lambda>|<class ")


def test_placeholder_pattern_catches_the_old_messages():
    for bad in ("space mismatch at dqn_loss.?(importance_weights): expected float32[B], received None",
                "x: got <harness.graph.records.Record object at 0x7f>", "method ? of x", "in <locals>"):
        assert PLACEHOLDER.search(bad), bad
    assert not PLACEHOLDER.search("space mismatch at dqn_loss.loss(importance_weights): expected float32[B]")


def _provoked_errors(backend):
    """(what, exception) for every bad build and call below."""
    from reference_agents.components.losses import DQNLoss

    dqn = {"q_values": "float32[B,3]", "actions": "int64[B](0,2)", "rewards": "float32[B]", "terminals": "bool[B]",
           "next_q_values_target": "float32[B,3]", "next_q_values_online": "float32[B,3]"}
    lin = {"x": FloatBox(2, batch_rank=True)}
    builds = {
        "dqn_loss without importance_weights": lambda: GraphExecutor(DQNLoss(), dqn, backend=backend),
        "dqn_loss int actions of the wrong size": lambda: GraphExecutor(
            DQNLoss(importance_weights=False), {**dqn, "actions": "int64[B](0,3)"}, backend=backend),
        "lin int input": lambda: GraphExecutor(Lin(), {"x": "int64[B,2]"}, backend=backend),
        "lin missing space": lambda: GraphExecutor(Lin(), {}, backend=backend),
        "lin unknown argument": lambda: GraphExecutor(Lin(), {**lin, "y": "float32[B]"}, backend=backend),
        "lin bad space text": lambda: GraphExecutor(Lin(), {"x": "float32[B,"}, backend=backend),
        "lin bad device map": lambda: GraphExecutor(Lin(), lin, backend=backend, device_map={"nope": "cpu"}),
    }
    out = []
    for what, make in builds.items():
        try:
            make()
        except Exception as exc:  # noqa: BLE001 - collected, checked below
            out.append((what, exc))
        else:
            out.append((what, None))
    ex = GraphExecutor(Probe(), SPACES, backend=backend, validate=True)
    lx = GraphExecutor(Lin(), lin, backend=backend)
    calls = {f"validate {v[0]}": (lambda v=v: ex.execute("apply", *v[1])) for v in VIOLATIONS}
    calls.update({
        "unknown method": lambda: ex.execute("nope"),
        "missing input": lambda: ex.execute("apply", good()[0]),
        "unknown keyword": lambda: ex.execute("apply", *good(), bad=1),
        "too many inputs": lambda: ex.execute("apply", *good(), 1),
        "dict for a box": lambda: ex.execute("apply", good()[0], {"a": 1}, good()[2]),
        "set_weights strict": lambda: lx.set_weights({"lin/kernel": np.zeros((2, 2), np.float32)}),
        "set_weights shape": lambda: lx.set_weights({**lx.get_weights(), "lin/bias": np.zeros(3)}),
        "api_function unknown": lambda: lx.api_function("nope"),
    })
    for what, call in calls.items():
        try:
            call()
        except Exception as exc:  # noqa: BLE001
            out.append((what, exc))
        else:
            out.append((what, None))
    return out


def _spec_bad_space_errors(backend):
    """The spacegraph errors of every bad space of every component spec (what suites/components provokes)."""
    from harness.specs import find_specs, load_spec

    out = []
    for path in find_specs(Path(__file__).resolve().parents[2] / "specs"):
        spec = load_spec(path)
        for i, entry in enumerate(spec.spec.bad_spaces):
            try:
                GraphExecutor(spec.make(), {**spec.spec.input_spaces, **entry}, backend=backend,
                              api_methods=list(spec.spec.methods))
            except SpacegraphError as exc:
                out.append((f"{Path(path).stem} bad_spaces.{i}", exc))
    return out


def test_no_error_message_has_a_placeholder(backend):
    errors = _provoked_errors(backend)
    assert all(exc is not None for _, exc in errors), [what for what, exc in errors if exc is None]
    errors += _spec_bad_space_errors(backend)
    assert len(errors) > 40
    bad = [(what, str(exc)) for what, exc in errors if PLACEHOLDER.search(str(exc)) or not str(exc).strip()]
    assert not bad, bad
    messages = {what: str(exc) for what, exc in errors}
    assert "dqn_loss.loss(importance_weights)" in messages["dqn_loss without importance_weights"]
