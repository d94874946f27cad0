"""The executor's and backends' per-call fast paths (issue 18) give what the general paths give."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import _arg_converter
from harness.graph.errors import ExecutionError
from harness.spaces import Dict, FloatBox, IntBox

SPACE = Dict(a=FloatBox(2, batch_rank=True), n=IntBox(4, batch_rank=True))
VALUE = {"a": np.ones((3, 2), np.float32), "n": np.array([0, 1, 3])}


def test_flat_dict_fast_path_equals_the_general_path(monkeypatch):
    fast = _arg_converter("Root 'root'", "apply", "obs", SPACE, lambda x: ("fed", x))
    out = fast(VALUE)
    assert list(out) == ["a", "n"] and all(v[0] == "fed" for v in out.values())
    np.testing.assert_array_equal(out["n"][1], VALUE["n"])
    # The fast path is taken: flatten_value is never called for a plain dict with exactly the keys.
    monkeypatch.setattr(type(SPACE), "flatten_value", lambda *a, **k: pytest.fail("general path taken"))
    fast(VALUE)


def test_flat_dict_fast_path_leaves_bad_values_to_the_general_errors():
    convert = _arg_converter("Root 'root'", "apply", "obs", SPACE, lambda x: x)
    with pytest.raises(ExecutionError, match=r"apply\(obs\): .*missing \['n'\]"):
        convert({"a": VALUE["a"]})
    with pytest.raises(ExecutionError, match=r"unexpected \['z'\]"):
        convert({**VALUE, "z": 1})
    with pytest.raises(ExecutionError, match=r"apply\(obs/n\): dtype float64 cannot be cast to int64"):
        convert({**VALUE, "n": np.array([1.0, 2.0, 3.0])})
    # A dict subclass takes the general path and gives the same result.
    class Sub(dict):
        pass
    np.testing.assert_array_equal(convert(Sub(VALUE))["a"], VALUE["a"])


def test_nested_dict_takes_the_general_path(monkeypatch):
    nested = Dict(x=SPACE, b=FloatBox(1, batch_rank=True))
    convert = _arg_converter("Root 'root'", "apply", "obs", nested, lambda x: x)
    calls = []
    general = Dict.flatten_value
    monkeypatch.setattr(Dict, "flatten_value", lambda self, *a, **k: calls.append(self) or general(self, *a, **k))
    out = convert({"x": VALUE, "b": np.zeros((3, 1), np.float32)})
    np.testing.assert_array_equal(out["x"]["n"], VALUE["n"])
    assert calls, "a nested Dict was converted without the general path"


def test_torch_api_call_sets_and_restores_grad_mode():
    torch = pytest.importorskip("torch")
    from harness.backends.torch.backend import TorchBackend

    seen = []

    def fn(x):
        seen.append(torch.is_grad_enabled())
        if x is None:
            raise ValueError("planted")
        return x

    backend = TorchBackend(0)
    no_grad = backend.compile_api("act", fn, {})
    with_grad = backend.compile_api("update", fn, {}, gradients=True)
    assert torch.is_grad_enabled()
    no_grad(1)
    with torch.no_grad():
        with_grad(1)
        assert not torch.is_grad_enabled()
    with pytest.raises(ValueError, match="planted"):
        no_grad(None)
    assert torch.is_grad_enabled()  # restored after the exception
    assert seen == [False, True, False]
