"""`HostOps`: the scalar part of the op namespace ``F`` in NumPy, for graph functions run on the host.

A graph function whose inputs and outputs are all scalars (rank 0, no batch or time rank: a time step,
an epsilon, a learning rate) does the same few arithmetic ops on every call. On PyTorch each op on a
0-d tensor costs one eager dispatch (1-2 us on a CPU); the same op on a NumPy scalar costs a tenth of
that. A backend that says so (``Backend.host_ops``) has the build run such functions with this namespace
instead of its own (`harness.graph.steps.host_step`): the function is written once against ``F`` as
always, and where it calls an op this namespace lacks (random draws, variables, shapes), or its result
differs from the backend's on the build's probe, it simply stays on the backend.

Semantics follow the backends': NaN propagates through `maximum`, `minimum` and `clip`; `cast` truncates
floats toward zero; Python numbers mixed with NumPy scalars keep the scalar's dtype (NEP 50, as PyTorch
and TensorFlow do). Where an integer meets a Python float NumPy computes in float64 and the backends in
float32; the step casts its outputs to the dtypes of their spaces, so what leaves it has the backend's
dtype (its value may be the more precise one by an ulp).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.backends.ops import ActivationLookup

_SCALAR_TYPES: dict[Any, type] = {}


def scalar_type(dtype: Any) -> type:
    """The NumPy scalar type of a dtype name or dtype (memoised: it runs on every cast)."""
    try:
        return _SCALAR_TYPES[dtype]
    except (KeyError, TypeError):
        found = np.dtype(dtype).type
        try:
            _SCALAR_TYPES[dtype] = found
        except TypeError:
            pass
        return found


_FLOATS = frozenset({np.float16, np.float32, np.float64})
_PYTHON_NUMBERS = frozenset({int, float})
_SCALARS = (np.generic, int, float, bool)


def _scalar(value: Any, op: str) -> Any:
    if isinstance(value, _SCALARS):  # what a host step passes: np.ndim's dispatch costs ~0.5 us a call
        return value
    if np.ndim(value) != 0:
        raise TypeError(f"HostOps.{op} takes scalars; got shape {np.shape(value)}")
    return value


def _sigmoid(x: Any) -> Any:
    # the two branches keep exp from overflowing (torch.sigmoid saturates to 0 and 1 without warnings)
    if x >= 0:
        return 1 / (1 + np.exp(-x))
    z = np.exp(x)
    return z / (1 + z)


class HostOps(ActivationLookup):
    """The scalar ops of ``F`` (see `harness.backends.ops.Ops`) on NumPy scalars.

    Ops that are not here (random draws, variable updates, shapes, reductions, layers) raise
    AttributeError, which keeps a graph function that calls them on its backend.
    """

    name = "host"

    @staticmethod
    def constant(value: Any, dtype: Any = None) -> Any:
        return _scalar(np.asarray(value, dtype=None if dtype is None else np.dtype(dtype)), "constant")[()]

    @staticmethod
    def cast(x: Any, dtype: Any) -> Any:
        return scalar_type(dtype)(_scalar(x, "cast"))

    @staticmethod
    def zeros_like(x: Any) -> Any:
        return np.zeros_like(_scalar(x, "zeros_like"))[()]

    @staticmethod
    def ones_like(x: Any) -> Any:
        return np.ones_like(_scalar(x, "ones_like"))[()]

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        return np.where(_scalar(cond, "where"), a, b)[()]

    # maximum and minimum (and so clip) of a NumPy float scalar and a Python number (a schedule clipped into
    # its range) compare in Python where the order is strict: two ufunc calls cost ~1.5 us, about a fifth of
    # the epsilon step. The number is first made a scalar of x's type, as the ufuncs make it (a Python number
    # is weak, NEP 50), so the result is theirs. Equal values (whose signed zeros the ufuncs order their own
    # way), NaNs and other types go to the ufuncs.
    @staticmethod
    def maximum(x: Any, y: Any) -> Any:
        if type(x) in _FLOATS and type(y) in _PYTHON_NUMBERS:
            y_ = type(x)(y)
            if x > y_:
                return x
            if x < y_:
                return y_
        return np.maximum(x, y)

    @staticmethod
    def minimum(x: Any, y: Any) -> Any:
        if type(x) in _FLOATS and type(y) in _PYTHON_NUMBERS:
            y_ = type(x)(y)
            if x < y_:
                return x
            if x > y_:
                return y_
        return np.minimum(x, y)

    @classmethod
    def clip(cls, x: Any, low: Any, high: Any) -> Any:
        # what torch.clamp and tf.clip_by_value compute: min(max(x, low), high), so high wins where low > high
        return cls.minimum(cls.maximum(x, low), high)

    abs = staticmethod(np.abs)
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    sqrt = staticmethod(np.sqrt)
    square = staticmethod(np.square)
    sign = staticmethod(np.sign)
    equal = staticmethod(np.equal)
    logical_and = staticmethod(np.logical_and)
    logical_or = staticmethod(np.logical_or)
    logical_not = staticmethod(np.logical_not)
    stop_gradient = staticmethod(lambda x: x)

    relu = staticmethod(lambda x: np.maximum(x, 0))
    tanh = staticmethod(np.tanh)
    sigmoid = staticmethod(_sigmoid)
    elu = staticmethod(lambda x: x if x > 0 else np.expm1(x))
    softplus = staticmethod(lambda x: np.logaddexp(0, x))

