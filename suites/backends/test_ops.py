"""The op namespace ``F``: both backends implement every op of the `Ops` protocol with its signature,
and every op agrees on TensorFlow, PyTorch and a NumPy reference (run inside built graph functions).

`CASES` has an entry for every name of `OP_NAMES`: a new op without a parity case fails
`test_op_parity` for that name.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

from harness.backends import get_backend
from harness.backends.base import OP_NAMES as BASE_OP_NAMES
from harness.backends.ops import OP_NAMES, Ops
from harness.graph import Component, api, graph_fn
from harness.spaces import BoolBox, FloatBox, IntBox, Tuple
from harness.testing import distributions as D
from harness.testing.component_test import ComponentTest, assert_outputs_equal
from suites.backends import numpy_reference as ref


# ---- the components that run an op inside a graph function -----------------------------------------


class OpApply(Component):
    """``apply(xs)`` = ``fn(F, *xs)``; with ``var``, ``fn(F, variable, *xs)`` and the variable's value after it."""

    def __init__(self, fn: Callable, var: tuple | None = None, gradients: bool = False) -> None:
        super().__init__(scope="op")
        self.fn, self.var_spec, self.variable = fn, var, None
        if gradients:
            self._graph_fn_apply = self._graph_fn_apply_recorded

    def create_variables(self, input_spaces: dict) -> None:
        if isinstance(self.var_spec, list):  # several variables, passed as a list
            self.variable = [self.get_variable(f"v{i}", shape, dtype, init, trainable=trainable)
                             for i, (shape, dtype, init, trainable) in enumerate(self.var_spec)]
        elif self.var_spec is not None:
            shape, dtype, init, trainable = self.var_spec
            self.variable = self.get_variable("v", shape, dtype, init, trainable=trainable)

    @api
    def apply(self, xs: Any) -> Any:
        return self._graph_fn_apply(xs)

    def _run(self, F: Any, xs: Any) -> Any:
        if self.variable is None:
            return self.fn(F, *xs)
        out = self.fn(F, self.variable, *xs)
        # Without an output, the variable's value after the op (a new tensor, not the variable's memory).
        if out is None and isinstance(self.variable, list):
            return tuple(v + 0 for v in self.variable)
        return self.variable + 0 if out is None else out

    @graph_fn
    def _graph_fn_apply(self, F: Any, xs: Any) -> Any:
        return self._run(F, xs)

    @graph_fn(gradients=True)
    def _graph_fn_apply_recorded(self, F: Any, xs: Any) -> Any:
        return self._run(F, xs)


@dataclass
class Case:
    """One use of an op: ``fn(F, *inputs)`` against ``reference(*inputs)`` (NumPy, float64 for float inputs)."""

    fn: Callable
    reference: Callable
    inputs: tuple
    spaces: tuple | None = None  # default: from the inputs (no batch rank)
    var: tuple | list | None = None  # (shape, dtype, initializer, trainable) of a variable passed before the inputs;
    # a list of them: the variables passed as a list (and, without an output, their values after the op as a tuple)
    gradients: bool = False
    rtol: float = 1e-5
    atol: float = 1e-5
    cross_tol: float = 1e-6  # TF vs torch
    check: Callable | None = None  # instead of reference comparison: check(result, inputs) (random ops)
    dtype_of: Callable | None = field(default=None)


def _space(value: np.ndarray) -> Any:
    if value.dtype == bool:
        return BoolBox(value.shape)
    if value.dtype.kind == "i":  # the build's sample runs draw indices no larger than the test's
        return IntBox(int(value.max(initial=0)) + 1, shape=value.shape, dtype=value.dtype.name)
    return FloatBox(value.shape, dtype=value.dtype.name)


def _batch(value: np.ndarray, high: int | None = None) -> Any:
    """A space with a batch rank over axis 0 of ``value`` (a dynamic size on TF)."""
    if value.dtype.kind == "i":
        return IntBox(high if high is not None else int(value.max(initial=0)) + 1, shape=value.shape[1:],
                      dtype=value.dtype.name, batch_rank=True)
    return FloatBox(value.shape[1:], dtype=value.dtype.name, batch_rank=True)


def _reference(case: Case) -> Any:
    inputs = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in case.inputs]
    expected = case.reference(*inputs)

    def to32(x: Any) -> Any:
        if isinstance(x, tuple):
            return tuple(to32(v) for v in x)
        x = np.asarray(x)
        # float32 inputs were widened for NumPy: the op answers in float32
        return x.astype(np.float32) if x.dtype == np.float64 and any(
            i.dtype == np.float32 for i in case.inputs) else x
    return to32(expected)


def _run(case: Case, backend: str) -> Any:
    spaces = case.spaces if case.spaces is not None else tuple(_space(x) for x in case.inputs)
    test = ComponentTest(OpApply(case.fn, case.var, case.gradients), {"xs": Tuple(list(spaces))}, backend=backend)
    return test.test("apply", tuple(case.inputs))


def _dtypes(value: Any) -> Any:
    return tuple(_dtypes(v) for v in value) if isinstance(value, tuple) else np.asarray(value).dtype


# ---- inputs ----------------------------------------------------------------------------------------

_R = np.random.default_rng(7)
A = _R.normal(size=(3, 4)).astype(np.float32)
A2 = _R.normal(size=(3, 4)).astype(np.float32)
M = _R.normal(size=(4, 2)).astype(np.float32)
P = _R.normal(size=(5, 3)).astype(np.float32)
POS = _R.uniform(0.5, 2.0, size=(3, 4)).astype(np.float32)
MASK = _R.random((3, 4)) < 0.5
MASK2 = _R.random((3, 4)) < 0.5
IDX = np.array([3, 0, 2])
IDX2 = np.array([[1, 0], [3, 3], [0, 2]])
SEQ = _R.normal(size=(5, 3)).astype(np.float32)  # [T, B]
SEQ_F = _R.uniform(0.0, 1.0, size=(5, 3)).astype(np.float32)
IMG = _R.normal(size=(2, 7, 6, 3)).astype(np.float32)
KERNEL = _R.normal(size=(3, 2, 3, 4)).astype(np.float32)
KERNEL3 = _R.normal(size=(3, 3, 3, 4)).astype(np.float32)
BIAS = _R.normal(size=(4,)).astype(np.float32)
ROWS = np.array([4, 1, 4, 0, 1, 4])
W1 = _R.normal(size=(3, 4)).astype(np.float32)
W2 = _R.normal(size=(4,)).astype(np.float32)
UPDATES = _R.normal(size=(6, 2)).astype(np.float32)
M_BIAS = _R.normal(size=(2,)).astype(np.float32)  # a bias for M's 2 columns


def _lstm_like(carry: Any, x: Any, tanh: Callable) -> tuple[Any, Any]:
    h, c = carry
    c = 0.5 * c + tanh(x + h)
    return tanh(c) * 0.9, c


def _moments(low: float, high: float, mean: float, std: float, dtype: Any) -> Callable:
    def check(result: np.ndarray, inputs: tuple) -> None:
        assert result.shape == (20000,) and result.dtype == np.dtype(dtype), (result.shape, result.dtype)
        assert result.min() >= low and result.max() < high, (result.min(), result.max())
        assert abs(result.mean() - mean) < 0.05 * std + 1e-3, f"mean {result.mean()} vs {mean}"
        assert abs(result.std() - std) < 0.05 * std, f"std {result.std()} vs {std}"
    return check


def _uniform_integers(high: int, dtype: Any) -> Callable:
    # Range, dtype and a chi-square test at alpha 1e-4 (the power calculation for a stated effect is in
    # suites/library/test_distributions.py; this is the per-op parity case on both backends).
    def check(result: np.ndarray, inputs: tuple) -> None:
        assert result.shape == (20000,) and result.dtype == np.dtype(dtype), (result.shape, result.dtype)
        assert result.min() == 0 and result.max() == high - 1, (result.min(), result.max())
        D.check_chi_square(D.Where("Ops", "random_integers", "", ""), result, np.full(high, 1.0 / high))
    return check


def _bernoulli(p: float) -> Callable:
    # Shape, dtype and a chi-square test of the two counts at alpha 1e-4, as for `_uniform_integers`.
    def check(result: np.ndarray, inputs: tuple) -> None:
        assert result.shape == (20000,) and result.dtype == np.bool_, (result.shape, result.dtype)
        D.check_chi_square(D.Where("Ops", "random_bernoulli", "", ""), result.astype(np.int64), [1.0 - p, p])
    return check


def _nothing(*_: Any) -> None:
    return None


def _value_and_first(value_grads: tuple) -> tuple:
    value, grads = value_grads
    return value, grads[0]


# op name: its cases. Every name of OP_NAMES but "name" (checked directly) needs one.
CASES: dict[str, list[Case]] = {
    "constant": [Case(lambda F, a: a + F.constant([1.0, 2.0, 3.0, 4.0], "float32"),
                      lambda a: a + np.array([1.0, 2.0, 3.0, 4.0]), (A,)),
                 Case(lambda F, a: F.constant(3) + F.cast(a, "int32"), lambda a: 3 + a.astype(np.int32), (IDX,))],
    "cast": [Case(lambda F, a: F.cast(a * 3.0, "int32"), lambda a: (a * 3.0).astype(np.int32), (A,)),
             Case(lambda F, i: F.cast(i, "float64") / 2.0, lambda i: i.astype(np.float64) / 2.0, (IDX,)),
             Case(lambda F, a: F.cast(7, "int64") + F.cast(F.dim(a, 0), "int64"),
                  lambda a: np.int64(7 + a.shape[0]), (A,), spaces=(_batch(A),))],
    "zeros": [Case(lambda F, a: F.zeros([2, 3], "int64") + 1, lambda a: np.ones((2, 3), np.int64), (A,)),
              Case(lambda F, a: F.zeros([F.dim(a, 0), 2]), lambda a: np.zeros((3, 2), np.float32), (A,),
                   spaces=(_batch(A),))],
    "ones": [Case(lambda F, a: F.ones([3, 4]) * a, lambda a: a, (A,))],
    "zeros_like": [Case(lambda F, a: F.zeros_like(a) + 1.5, lambda a: np.full_like(a, 1.5), (A,))],
    "ones_like": [Case(lambda F, i: F.ones_like(i) * 2, lambda i: np.full_like(i, 2), (IDX,))],
    "arange": [Case(lambda F, n: F.arange(n), lambda n: np.arange(n), (np.array(5),)),
               Case(lambda F, n: F.arange(n, "float32") * 0.5, lambda n: (np.arange(n) * 0.5).astype(np.float32),
                    (np.array(4, np.int32),)),
               Case(lambda F, n: F.arange(n - 3), lambda n: np.arange(0), (np.array(2),)),  # n <= 0: empty
               Case(lambda F, a: F.arange(F.dim(a, 0)), lambda a: np.arange(3), (A,), spaces=(_batch(A),))],
    "dim": [Case(lambda F, a: F.reshape(a, [F.dim(a, 0), F.dim(a, 1) * F.dim(a, 2)]),
                 lambda a: a.reshape(2, 12), (np.stack([A, A2]),), spaces=(_batch(np.stack([A, A2])),))],
    "reshape": [Case(lambda F, a: F.reshape(a, (2, 6)), lambda a: a.reshape(2, 6), (A,)),
                Case(lambda F, a: F.reshape(a, [-1]), lambda a: a.reshape(-1), (A,), spaces=(_batch(A),))],
    "concat": [Case(lambda F, a, b: F.concat([a, b], 0), lambda a, b: np.concatenate([a, b], 0), (A, A2)),
               Case(lambda F, a, b: F.concat([a, b]), lambda a, b: np.concatenate([a, b], -1), (A, A2))],
    "stack": [Case(lambda F, a, b: F.stack([a, b], 1), lambda a, b: np.stack([a, b], 1), (A, A2)),
              Case(lambda F, a, b: F.stack([a, b]), lambda a, b: np.stack([a, b]), (A, A2))],
    "transpose": [Case(lambda F, a: F.transpose(a, (1, 0)), np.transpose, (A,)),
                  Case(lambda F, x: F.transpose(x, [0, 3, 1, 2]), lambda x: x.transpose(0, 3, 1, 2), (IMG,))],
    "expand_dims": [Case(lambda F, a: F.expand_dims(a, 1), lambda a: a[:, None], (A,)),
                    Case(lambda F, a: F.expand_dims(a, -1), lambda a: a[..., None], (A,))],
    "squeeze": [Case(lambda F, a: F.squeeze(a[:, :1], 1), lambda a: a[:, 0], (A,))],
    "pad": [Case(lambda F, a: F.pad(a, [(1, 0), (0, 2)]), lambda a: np.pad(a, ((1, 0), (0, 2))), (A,)),
            Case(lambda F, x: F.pad(x, [(0, 0), (2, 1), (0, 1), (0, 0)], -1.5),
                 lambda x: np.pad(x, ((0, 0), (2, 1), (0, 1), (0, 0)), constant_values=-1.5), (IMG,))],
    "matmul": [Case(lambda F, a, m: F.matmul(a, m), np.matmul, (A, M)),
               Case(lambda F, a, m: F.matmul(F.stack([a, a]), m), lambda a, m: np.matmul(np.stack([a, a]), m),
                    (A, M))],
    "dense": [Case(lambda F, a, m, b: F.dense(a, m, b), lambda a, m, b: a @ m + b, (A, M, M_BIAS)),
              Case(lambda F, a, m: F.dense(a, m), np.matmul, (A, M)),
              Case(lambda F, a, a2, m, b: F.dense(F.stack([a, a2]), m, b),  # [T, B, n]: leading axes broadcast
                   lambda a, a2, m, b: np.stack([a, a2]) @ m + b, (A, A2, M, M_BIAS)),
              Case(lambda F, v, x, b: F.gradients(F.reduce_sum(F.square(F.dense(x, v, b))), [v])[0],
                   lambda x, b: 2.0 * x.T @ (x @ M.astype(np.float64) + b), (A, M_BIAS), spaces=(_batch(A), _space(M_BIAS)),
                   var=((4, 2), "float32", M, True), gradients=True, rtol=1e-4, atol=1e-4)],
    "reduce_sum": [Case(lambda F, a: F.reduce_sum(a, 1), lambda a: a.sum(1), (A,)),
                   Case(lambda F, a: F.reduce_sum(a), np.sum, (A,)),
                   Case(lambda F, a: F.reduce_sum(a, (0, 1), keepdims=True), lambda a: a.sum((0, 1), keepdims=True),
                        (A,))],
    "reduce_mean": [Case(lambda F, a: F.reduce_mean(a, 0, keepdims=True), lambda a: a.mean(0, keepdims=True), (A,)),
                    Case(lambda F, a: F.reduce_mean(a), np.mean, (A,))],
    "reduce_max": [Case(lambda F, a: F.reduce_max(a, -1), lambda a: a.max(-1), (A,)),
                   Case(lambda F, a: F.reduce_max(a, keepdims=True), lambda a: a.max(keepdims=True), (A,))],
    "reduce_min": [Case(lambda F, a: F.reduce_min(a), np.min, (A,)),
                   Case(lambda F, a: F.reduce_min(a, 0), lambda a: a.min(0), (A,))],
    "argmax": [Case(lambda F, a: F.argmax(a, -1), lambda a: a.argmax(-1), (A,)),
               Case(lambda F, a: F.argmax(a, 0), lambda a: a.argmax(0), (A,)),
               Case(lambda F, a: F.argmax(F.zeros_like(a)), lambda a: np.zeros(3, np.int64), (A,))],  # ties: first
    "where": [Case(lambda F, c, a, b: F.where(c, a, b), np.where, (MASK, A, A2)),
              Case(lambda F, c, a: F.where(c, a, F.zeros_like(a)), lambda c, a: np.where(c, a, 0.0), (MASK, A))],
    "maximum": [Case(lambda F, a, b: F.maximum(a, b), np.maximum, (A, A2)),
                Case(lambda F, a: F.maximum(a, 0.25), lambda a: np.maximum(a, 0.25), (A,))],
    "minimum": [Case(lambda F, a, b: F.minimum(a, b), np.minimum, (A, A2)),
                Case(lambda F, i: F.minimum(i, 2), lambda i: np.minimum(i, 2), (IDX,))],
    "clip": [Case(lambda F, a: F.clip(a, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), (A,))],
    "abs": [Case(lambda F, a: F.abs(a), np.abs, (A,))],
    "exp": [Case(lambda F, a: F.exp(a), np.exp, (A,))],
    "log": [Case(lambda F, a: F.log(a), np.log, (POS,))],
    "sqrt": [Case(lambda F, a: F.sqrt(a), np.sqrt, (POS,))],
    "square": [Case(lambda F, a: F.square(a), np.square, (A,))],
    "sign": [Case(lambda F, a: F.sign(a), np.sign, (np.concatenate([A, np.zeros((1, 4), np.float32)]),))],
    "equal": [Case(lambda F, m, n: F.equal(m, n), np.equal, (MASK, MASK2)),
              Case(lambda F, i: F.equal(i, 3), lambda i: i == 3, (IDX,))],
    "logical_and": [Case(lambda F, m, n: F.logical_and(m, n), np.logical_and, (MASK, MASK2))],
    "logical_or": [Case(lambda F, m, n: F.logical_or(m, n), np.logical_or, (MASK, MASK2))],
    "logical_not": [Case(lambda F, m: F.logical_not(m), np.logical_not, (MASK,))],
    "one_hot": [Case(lambda F, i: F.one_hot(i, 4), lambda i: np.eye(4, dtype=np.float32)[i], (IDX,)),
                Case(lambda F, i: F.one_hot(i, 4, "int64"), lambda i: np.eye(4, dtype=np.int64)[i], (IDX2,))],
    "gather": [Case(lambda F, p, i: F.gather(p, i), lambda p, i: np.take(p, i, 0), (P, IDX)),
               Case(lambda F, p, i: F.gather(p, i, axis=1), lambda p, i: np.take(p, i, 1), (P, IDX2 % 3))],
    "take_along_axis": [Case(lambda F, a, i: F.take_along_axis(a, i, 1), lambda a, i: np.take_along_axis(a, i, 1),
                             (A, IDX2))],
    "select_last": [Case(lambda F, a, i: F.select_last(a, i), lambda a, i: a[np.arange(3), i], (A, IDX),
                         spaces=(_batch(A), _batch(IDX, 4))),
                    Case(lambda F, a, b, i: F.select_last(F.stack([a, b], 1), i),  # [B, 2, 4] by [B, 2]
                         lambda a, b, i: np.take_along_axis(np.stack([a, b], 1), i[..., None], -1)[..., 0],
                         (A, A2, IDX2), spaces=(_batch(A), _batch(A2), _batch(IDX2, 4))),
                    Case(lambda F, a, i: F.select_last(a, i), lambda a, i: a[np.arange(3), i],
                         (A, IDX.astype(np.int32))),
                    # gradients reach the selected entries only (twice for an entry selected twice)
                    Case(lambda F, v, x, i: F.gradients(F.reduce_sum(F.select_last(v * x, i)), [v])[0],
                         lambda x, i: np.bincount(i, weights=x[np.arange(3), i], minlength=4),
                         (A, np.array([3, 0, 3])), spaces=(_batch(A), _batch(IDX, 4)),
                         var=((4,), "float32", "ones", True), gradients=True)],
    "stop_gradient": [Case(lambda F, a: F.stop_gradient(a) * 2.0, lambda a: a * 2.0, (A,)),
                      Case(lambda F, v, x: F.gradients(F.reduce_sum(F.stop_gradient(v) * v * x), [v])[0],
                           lambda x: np.array([1.0, 2.0, 3.0]) * x.sum(0), (A[:, :3],),
                           spaces=(_batch(A[:, :3]),), var=((3,), "float32", np.array([1.0, 2.0, 3.0]), True),
                           gradients=True)],
    "conv2d": [Case(lambda F, x, k: F.conv2d(x, k), lambda x, k: ref.conv2d(x, k, (1, 1), "valid"), (IMG, KERNEL),
                    spaces=(_batch(IMG), _space(KERNEL)), rtol=1e-4, atol=1e-4, cross_tol=1e-5),
               Case(lambda F, x, k, b: F.conv2d(x, k, (2, 2), "same", b),  # SAME pads W by (0, 1): asymmetric
                    lambda x, k, b: ref.conv2d(x, k, (2, 2), "same", b), (IMG, KERNEL3, BIAS),
                    spaces=(_batch(IMG), _space(KERNEL3), _space(BIAS)), rtol=1e-4, atol=1e-4, cross_tol=1e-5),
               Case(lambda F, x, k: F.conv2d(x, k, (1, 1), "same"),  # an even kernel width: W padded by (0, 1)
                    lambda x, k: ref.conv2d(x, k, (1, 1), "same"), (IMG, KERNEL), rtol=1e-4, atol=1e-4,
                    cross_tol=1e-5),
               Case(lambda F, x, k: F.conv2d(x, k, (1, 1), "same"),  # symmetric SAME padding
                    lambda x, k: ref.conv2d(x, k, (1, 1), "same"), (IMG, KERNEL3), rtol=1e-4, atol=1e-4,
                    cross_tol=1e-5),
               Case(lambda F, x, k, b: F.conv2d(x, k, (2, 1), "valid", b),
                    lambda x, k, b: ref.conv2d(x, k, (2, 1), "valid", b), (IMG, KERNEL3, BIAS),
                    rtol=1e-4, atol=1e-4, cross_tol=1e-5)],
    "max_pool2d": [Case(lambda F, x: F.max_pool2d(x), lambda x: ref.max_pool2d(x, (2, 2), (2, 2), "valid"), (IMG,)),
                   Case(lambda F, x: F.max_pool2d(x, (3, 3), (2, 2), "same"),  # H 7: pads (1, 1); W 6: (0, 1)
                        lambda x: ref.max_pool2d(x, (3, 3), (2, 2), "same"), (IMG,)),
                   Case(lambda F, x: F.max_pool2d(x, (2, 3), (1, 2), "same"),  # uneven windows and steps
                        lambda x: ref.max_pool2d(x, (2, 3), (1, 2), "same"), (-np.abs(IMG),)),
                   Case(lambda F, x: F.max_pool2d(x, (3, 3), (1, 1), "same"),  # even SAME padding (1, 1) both ways
                        lambda x: ref.max_pool2d(x, (3, 3), (1, 1), "same"), (-np.abs(IMG),)),
                   Case(lambda F, x: F.max_pool2d(x, (3, 1), (2, 1), "valid"),
                        lambda x: ref.max_pool2d(x, (3, 1), (2, 1), "valid"), (IMG,)),
                   Case(lambda F, v, x: F.gradients(F.reduce_sum(F.max_pool2d(v * x, (3, 3), (2, 2), "same")), [v])[0],
                        lambda x: ref.max_pool2d_grad(x, (3, 3), (2, 2), "same"), (np.abs(IMG),),
                        spaces=(_batch(IMG),), var=(IMG.shape[1:], "float32", np.ones(IMG.shape[1:]), True),
                        gradients=True)],
    "scatter_update": [
        Case(lambda F, v, r, u: F.scatter_update(v, r, u),  # repeats: the last wins
             lambda r, u: ref.scatter(np.zeros((6, 2)), r, u), (ROWS, UPDATES),
             spaces=(_batch(ROWS, 6), _batch(UPDATES)), var=((6, 2), "float32", "zeros", False)),
        Case(lambda F, v, r, u: F.scatter_update(v, r, u, unique=True),
             lambda r, u: ref.scatter(np.ones((6, 2)), r, u), (np.array([5, 0, 2], np.int32), UPDATES[:3]),
             spaces=(_batch(np.array([5, 0, 2], np.int32), 6), _batch(UPDATES)),
             var=((6, 2), "float32", "ones", False)),
        Case(lambda F, v, r, u: F.scatter_update(v, r, u),  # updates cast to the variable's dtype
             lambda r, u: ref.scatter(np.zeros(8, np.int64), r, u.astype(np.int64)),
             (np.array([7, 7, 3, 7, 0]), np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)),
             spaces=(_batch(np.array([7, 7, 3, 7, 0]), 8), _batch(np.zeros(5, np.float32))),
             var=((8,), "int64", "zeros", False)),
        Case(lambda F, v, r, u: F.scatter_update(v, r, u),  # an empty batch writes nothing
             lambda r, u: np.zeros((6, 2)), (ROWS[:0], UPDATES[:0]),
             spaces=(_batch(ROWS, 6), _batch(UPDATES)), var=((6, 2), "float32", "zeros", False))],
    "scan": [
        Case(lambda F, x: F.scan(lambda acc, e: 0.5 * acc + e, x, F.zeros_like(F.reduce_sum(x[:1], 0))),
             lambda x: ref.scan(lambda acc, e: 0.5 * acc + e, x, np.zeros(3)), (SEQ,), spaces=(_batch(SEQ),)),
        Case(lambda F, x, a: F.scan(lambda acc, xa: xa[0] + xa[1] * acc, (x, a), F.zeros_like(F.reduce_sum(x[:1], 0)),
                                    reverse=True),
             lambda x, a: ref.scan(lambda acc, xa: xa[0] + xa[1] * acc, (x, a), np.zeros(3), reverse=True),
             (SEQ, SEQ_F), spaces=(_batch(SEQ), _batch(SEQ_F))),
        Case(lambda F, x, a: F.scan(lambda acc, xa: xa[0] + xa[1] * acc, (x, a), F.zeros_like(F.reduce_sum(x[:1], 0)),
                                    reverse=True),  # T = 0 (dynamic on TF): the initializer and empty stacks
             lambda x, a: (np.zeros(3), np.zeros((0, 3))), (SEQ[:0], SEQ_F[:0]), spaces=(_batch(SEQ), _batch(SEQ_F))),
        Case(lambda F, x, h: F.scan(lambda c, e: _lstm_like(c, e, F.tanh), x, (h, h * 2.0)),
             lambda x, h: ref.scan(lambda c, e: _lstm_like(c, e, np.tanh), x, (h, h * 2.0)), (SEQ, SEQ[0]),
             spaces=(_batch(SEQ), _space(SEQ[0]))),
        Case(lambda F, x, h: F.scan(lambda c, e: _lstm_like(c, e, F.tanh), x, (h, h * 2.0)),  # T = 0, a tuple carry
             lambda x, h: ((h, h * 2.0), (np.zeros((0, 3)), np.zeros((0, 3)))), (SEQ[:0], SEQ[0]),
             spaces=(_batch(SEQ), _space(SEQ[0])))],
    "relu": [Case(lambda F, a: F.relu(a), lambda a: np.maximum(a, 0.0), (A,))],
    "tanh": [Case(lambda F, a: F.tanh(a), np.tanh, (A,))],
    "sigmoid": [Case(lambda F, a: F.sigmoid(a), lambda a: 1.0 / (1.0 + np.exp(-a)), (A,))],
    "elu": [Case(lambda F, a: F.elu(a), lambda a: np.where(a > 0, a, np.expm1(a)), (A,))],
    "softplus": [Case(lambda F, a: F.softplus(a), lambda a: np.log1p(np.exp(a)), (A,))],
    "softmax": [Case(lambda F, a: F.softmax(a), ref.softmax, (A,)),
                Case(lambda F, a: F.softmax(a, 0), lambda a: ref.softmax(a.T).T, (A,))],
    "log_softmax": [Case(lambda F, a: F.log_softmax(a, -1), lambda a: np.log(ref.softmax(a)), (A,))],
    "activation": [Case(lambda F, a: F.stack([F.activation(n)(a) for n in (None, "linear", "relu", "tanh", "sigmoid",
                                                                            "elu", "softplus")]),
                        lambda a: np.stack([a, a, np.maximum(a, 0), np.tanh(a), 1 / (1 + np.exp(-a)),
                                            np.where(a > 0, a, np.expm1(a)), np.log1p(np.exp(a))]), (A,))],
    "random_uniform": [Case(lambda F, n: F.random_uniform(F.reshape(n, [1]), 2.0, 5.0), None, (np.array(20000),),
                            check=_moments(2.0, 5.0, 3.5, 3.0 / np.sqrt(12.0), np.float32)),
                       Case(lambda F, n: F.random_uniform([20000], dtype="float64"), None, (np.array(1),),
                            check=_moments(0.0, 1.0, 0.5, 1.0 / np.sqrt(12.0), np.float64))],
    "random_integers": [Case(lambda F, n: F.random_integers(F.reshape(n, [1]), 7), None, (np.array(20000),),
                             check=_uniform_integers(7, "int64")),
                        Case(lambda F, n: F.random_integers([20000], 3, dtype="int32"), None, (np.array(1),),
                             check=_uniform_integers(3, "int32"))],
    "random_bernoulli": [Case(lambda F, n: F.random_bernoulli(F.reshape(n, [1]), 0.3), None, (np.array(20000),),
                              check=_bernoulli(0.3)),
                         # the probability as a scalar tensor (an epsilon schedule's output), float32 and float64
                         Case(lambda F, n: F.random_bernoulli([20000], F.constant(0.8, "float32")), None,
                              (np.array(1),), check=_bernoulli(0.8)),
                         Case(lambda F, n: F.random_bernoulli([20000], F.cast(F.constant(0.05, "float32"), "float64")),
                              None, (np.array(1),), check=_bernoulli(0.05))],
    "random_normal": [Case(lambda F, n: F.random_normal([20000], 1.0, 2.0), None, (np.array(1),),
                           check=_moments(-np.inf, np.inf, 1.0, 2.0, np.float32))],
    "global_norm": [Case(lambda F, a, b: F.global_norm([a, b]), lambda a, b: np.sqrt((a ** 2).sum() + (b ** 2).sum()),
                         (A, A2[0])),
                    Case(lambda F, a: F.global_norm([a]), lambda a: np.sqrt((a ** 2).sum()), (A,)),
                    # mixed dtypes: the first tensor's (float32) answers
                    Case(lambda F, a, b: F.global_norm([a, F.cast(b, "float64") * 3.0]),
                         lambda a, b: np.sqrt((a ** 2).sum() + (9.0 * b ** 2).sum()), (A, A2))],
    "scale_each": [Case(lambda F, a, b, c: tuple(F.scale_each([a, b], F.reduce_sum(c))),
                        lambda a, b, c: (a * c.sum(), b * c.sum()), (A, A2[0], POS[0])),
                   Case(lambda F, a, c: tuple(F.cast(x, "float32") for x in F.scale_each([F.cast(a, "float64"), a],
                                                                                            F.reduce_sum(c))),
                        lambda a, c: (a * c.sum(), a * c.sum()), (A, POS[0]))],
    # Two variables of different shapes; lr, betas and epsilon away from their usual values and unequal; at
    # step 3 the bias corrections are far from 1; m and v start away from zero.
    "adam_update": [Case(lambda F, vs, g1, g2, t: F.adam_update(vs[:2], [g1, g2], vs[2:4], vs[4:], t, 0.05, 0.7, 0.9,
                                                                 0.03),
                         lambda g1, g2, t: ref.adam([W1, W2], [g1, g2], [W1 * 0.1, W2 * -0.2], [W1 ** 2, W2 ** 2 / 3],
                                                    int(t), 0.05, 0.7, 0.9, 0.03),
                         (A, A[0], np.array(3)),
                         var=[((3, 4), "float32", W1, True), ((4,), "float32", W2, True),
                              ((3, 4), "float32", W1 * 0.1, False), ((4,), "float32", W2 * -0.2, False),
                              ((3, 4), "float32", W1 ** 2, False), ((4,), "float32", W2 ** 2 / 3, False)],
                         rtol=1e-5, atol=1e-6, cross_tol=1e-5)],
    # Centered with momentum (mg starts larger than sqrt(ms): the max(., 0) guard must act), then plain.
    "rmsprop_update": [Case(lambda F, vs, g1, g2: F.rmsprop_update(vs[:2], [g1, g2], vs[2:4], vs[4:6], vs[6:], 0.02,
                                                                   0.8, 0.6, 1e-2),
                            lambda g1, g2: ref.rmsprop([W1, W2], [g1, g2], [W1 ** 2 * 0.01, W2 ** 2 * 0.01],
                                                       [W1 * 3, W2 * 3], [W1 * 0.5, W2 * 0.5], 0.02, 0.8, 0.6, 1e-2),
                            (A, A[0]),
                            var=[((3, 4), "float32", W1, True), ((4,), "float32", W2, True),
                                 ((3, 4), "float32", W1 ** 2 * 0.01, False), ((4,), "float32", W2 ** 2 * 0.01, False),
                                 ((3, 4), "float32", W1 * 3, False), ((4,), "float32", W2 * 3, False),
                                 ((3, 4), "float32", W1 * 0.5, False), ((4,), "float32", W2 * 0.5, False)],
                            rtol=1e-5, atol=1e-6, cross_tol=1e-5),
                       Case(lambda F, vs, g1: F.rmsprop_update(vs[:1], [g1], vs[1:], None, None, 0.02, 0.8, 0.0, 1e-2),
                            lambda g1: ref.rmsprop([W1], [g1], [np.abs(W1)], None, None, 0.02, 0.8, 0.0, 1e-2),
                            (A,), var=[((3, 4), "float32", W1, True), ((3, 4), "float32", np.abs(W1), False)],
                            rtol=1e-5, atol=1e-6, cross_tol=1e-5),
                       # epsilon outside the root (PyTorch's form): centered with momentum, then plain
                       Case(lambda F, vs, g1: F.rmsprop_update(vs[:1], [g1], vs[1:2], vs[2:3], vs[3:], 0.02, 0.8, 0.6,
                                                               0.3, epsilon_outside=True),
                            lambda g1: ref.rmsprop([W1], [g1], [W1 ** 2 * 0.01], [W1 * 3], [W1 * 0.5], 0.02, 0.8,
                                                   0.6, 0.3, outside=True),
                            (A,), var=[((3, 4), "float32", W1, True), ((3, 4), "float32", W1 ** 2 * 0.01, False),
                                       ((3, 4), "float32", W1 * 3, False), ((3, 4), "float32", W1 * 0.5, False)],
                            rtol=1e-5, atol=1e-6, cross_tol=1e-5),
                       Case(lambda F, vs, g1: F.rmsprop_update(vs[:1], [g1], vs[1:], None, None, 0.02, 0.8, 0.0, 0.3,
                                                               epsilon_outside=True),
                            lambda g1: ref.rmsprop([W1], [g1], [np.abs(W1)], None, None, 0.02, 0.8, 0.0, 0.3,
                                                   outside=True),
                            (A,), var=[((3, 4), "float32", W1, True), ((3, 4), "float32", np.abs(W1), False)],
                            rtol=1e-5, atol=1e-6, cross_tol=1e-5)],
    "assign": [Case(lambda F, v, x: _nothing(F.assign(v, x)), lambda x: x, (A,),
                    var=((3, 4), "float32", "zeros", False)),
               Case(lambda F, v, x: _nothing(F.assign(v, v + x)), lambda x: x + 1.0, (A,),
                    var=((3, 4), "float32", "ones", False))],
    "gradients": [Case(lambda F, v, x: F.gradients(F.reduce_sum(F.square(v * x)), [v])[0],
                       lambda x: 2.0 * np.array([1.0, -2.0, 0.5]) * (x ** 2).sum(0), (A[:, :3],),
                       spaces=(_batch(A[:, :3]),), var=((3,), "float32", np.array([1.0, -2.0, 0.5]), True),
                       gradients=True),
                  Case(lambda F, v, x: F.gradients(F.reduce_sum(x), [v])[0],  # not a function of v: zeros
                       lambda x: np.zeros(3), (A[:, :3],), spaces=(_batch(A[:, :3]),),
                       var=((3,), "float32", "ones", True), gradients=True)],
    "value_and_grad": [Case(lambda F, v, x: _value_and_first(F.value_and_grad(lambda: F.reduce_sum(F.square(v * x)),
                                                                              [v])),
                            lambda x: (np.sum((np.array([1.0, -2.0, 0.5]) * x) ** 2),
                                       2.0 * np.array([1.0, -2.0, 0.5]) * (x ** 2).sum(0)),
                            (A[:, :3],), spaces=(_batch(A[:, :3]),),
                            # OpApply calls it through the case's function, which the build cannot see: declared
                            var=((3,), "float32", np.array([1.0, -2.0, 0.5]), True), gradients=True)],
}


def _listify(value: Any) -> Any:
    """Lists (value_and_grad's gradients) as tuples, so outputs and references nest alike."""
    if isinstance(value, (list, tuple)):
        return tuple(_listify(v) for v in value)
    return value


@pytest.mark.parametrize("op", OP_NAMES)
def test_op_parity(op: str, backends: list[str]) -> None:
    """Every op agrees with NumPy on each backend, and TF with PyTorch (random ops: their moments)."""
    if op == "name":
        for backend in backends:
            assert get_backend(backend).ops.name == backend
        return
    assert op in CASES, f"op {op!r} of the Ops protocol has no parity case in suites/backends/test_ops.py CASES"
    for number, case in enumerate(CASES[op]):
        what = f"F.{op} case {number}"
        results = {}
        for backend in backends:
            result = _listify(_run(case, backend))
            if case.check is not None:
                case.check(result, case.inputs)
            else:
                expected = _reference(case)
                assert_outputs_equal(result, _listify(expected), what=f"{what} on {backend} vs NumPy",
                                     rtol=case.rtol, atol=case.atol)
                assert _dtypes(result) == _dtypes(_listify(expected)), (
                    f"{what} on {backend}: dtypes {_dtypes(result)}, NumPy {_dtypes(_listify(expected))}")
            results[backend] = result
        if len(results) == 2 and case.check is None:
            assert_outputs_equal(results["torch"], results["tf"], what=f"{what}: torch vs tf",
                                 rtol=case.cross_tol, atol=case.cross_tol)
            assert _dtypes(results["torch"]) == _dtypes(results["tf"]), (what, _dtypes(results["torch"]),
                                                                         _dtypes(results["tf"]))


def test_every_op_has_a_case_and_no_case_names_an_unknown_op() -> None:
    assert set(CASES) == set(OP_NAMES) - {"name"}, (
        f"ops without a case: {sorted(set(OP_NAMES) - {'name'} - set(CASES))}; "
        f"cases of no op: {sorted(set(CASES) - set(OP_NAMES))}")


def test_op_names_come_from_the_protocol() -> None:
    assert BASE_OP_NAMES is OP_NAMES
    declared = {k for k, v in vars(Ops).items() if not k.startswith("_") and callable(v)}
    assert set(OP_NAMES) == declared | {"name"}
    for op in OP_NAMES[1:]:
        doc = inspect.getdoc(getattr(Ops, op))
        assert doc and doc.strip(), f"Ops.{op} has no docstring stating its semantics"


def _protocol_parameters(op: str) -> list[inspect.Parameter]:
    return list(inspect.signature(getattr(Ops, op)).parameters.values())[1:]  # without self


def signature_mismatch(op: str, impl: Callable) -> str | None:
    """Why ``impl`` cannot be called as ``Ops.<op>`` is declared, or None when it can.

    Required protocol parameters must be accepted positionally (any name); parameters
    with defaults by the same name, at the same position, with the same default; any
    further parameter of ``impl`` needs a default. A builtin without an introspectable
    signature is accepted only for ops whose parameters are all required.
    """
    declared = _protocol_parameters(op)
    try:
        params = list(inspect.signature(impl).parameters.values())
    except (TypeError, ValueError):
        with_defaults = [p.name for p in declared if p.default is not p.empty]
        return (f"{impl!r} has no signature to check; an op with defaults {with_defaults} must be "
                f"a Python function") if with_defaults else None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind == p.VAR_POSITIONAL for p in params)
    for i, want in enumerate(declared):
        if i >= len(positional):
            if not var_positional:
                return f"takes {len(positional)} positional parameters; the protocol declares {len(declared)}"
            continue
        got = positional[i]
        if want.default is not want.empty:
            if got.name != want.name:
                return f"parameter {i} is {got.name!r}; the protocol's is {want.name!r}={want.default!r}"
            if got.default != want.default:
                return f"{want.name!r} defaults to {got.default!r}; the protocol's default is {want.default!r}"
    extra = [p.name for p in positional[len(declared):] if p.default is p.empty]
    extra += [p.name for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if extra:
        return f"needs parameters {extra} that the protocol does not declare"
    return None


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_both_backends_implement_every_op_with_its_signature(backend: str, backends: list[str]) -> None:
    if backend not in backends:
        pytest.skip(f"backend {backend!r} is not selected/installed")
    ops = get_backend(backend).ops
    missing = [op for op in OP_NAMES if not hasattr(ops, op)]
    assert not missing, f"backend {backend!r} lacks ops {missing}"
    problems = {op: why for op in OP_NAMES[1:] if (why := signature_mismatch(op, getattr(ops, op)))}
    assert not problems, f"backend {backend!r}: signatures differ from the Ops protocol: {problems}"
    assert isinstance(ops, Ops)


def test_signature_check_catches_a_mismatch() -> None:
    assert signature_mismatch("reduce_sum", lambda x, axis=None, keepdims=False: x) is None
    assert "'keepdims' defaults to True" in signature_mismatch("reduce_sum", lambda x, axis=None, keepdims=True: x)
    assert "parameter 1 is 'dim'" in signature_mismatch("reduce_sum", lambda x, dim=None, keepdims=False: x)
    assert "positional parameters" in signature_mismatch("where", lambda cond, a: a)
    assert "needs parameters ['extra']" in signature_mismatch("abs", lambda x, extra: x)
    # max: a builtin without an introspectable signature, like many torch ops
    assert "must be a Python function" in signature_mismatch("softmax", max)
    assert signature_mismatch("abs", max) is None


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_activation_rejects_an_unknown_name(backend: str, backends: list[str]) -> None:
    if backend not in backends:
        pytest.skip(f"backend {backend!r} is not selected/installed")
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        get_backend(backend).ops.activation("swish")


@pytest.mark.parametrize("op", ["conv2d", "max_pool2d"])
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_windowed_ops_reject_an_unknown_padding(backend: str, op: str, backends: list[str]) -> None:
    if backend not in backends:
        pytest.skip(f"backend {backend!r} is not selected/installed")
    b = get_backend(backend)
    second = (b.to_tensor(KERNEL),) if op == "conv2d" else ((2, 2),)
    with pytest.raises(ValueError, match=rf"F.{op}: padding must be one of \('valid', 'same'\); got 'full'"):
        getattr(b.ops, op)(b.to_tensor(IMG), *second, (1, 1), "full")


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_to_device_keeps_the_structure_and_makes_backend_tensors(backend: str, backends: list[str]) -> None:
    if backend not in backends:
        pytest.skip(f"backend {backend!r} is not selected/installed")
    b = get_backend(backend)
    batch = {"x": A, "pair": (IDX, [MASK])}
    moved = b.to_device(batch, "cpu" if backend == "torch" else "/CPU:0")
    assert set(moved) == {"x", "pair"} and isinstance(moved["pair"], tuple) and isinstance(moved["pair"][1], list)
    for got, want in ((moved["x"], A), (moved["pair"][0], IDX), (moved["pair"][1][0], MASK)):
        assert b.is_tensor(got)
        np.testing.assert_array_equal(b.to_numpy(got), want)


def test_torch_draws_follow_a_device_context(backends: list[str]) -> None:
    """Random draws come from the seeded CPU generator and move to the device a placed step runs on."""
    if "torch" not in backends:
        pytest.skip("torch is not selected/installed")
    import torch

    ops = get_backend("torch").ops
    assert ops.random_uniform([3]).device.type == "cpu"
    with torch.device("meta"):  # a device context as `TorchBackend.place` opens for a step on another device
        assert ops.random_uniform([3]).device.type == "meta"
        assert ops.random_normal([2, 2]).device.type == "meta"
    assert ops.random_normal([3]).device.type == "cpu"
