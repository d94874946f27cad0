"""The op namespace ``F`` for graph functions on TensorFlow."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

from harness.backends.base import ACTIVATIONS


class TFOps:
    """Backend-neutral ops implemented with TensorFlow (see `harness.backends.base.OP_NAMES`)."""

    name = "tf"

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._gen = tf.random.Generator.from_seed(seed)
        self._tape: tf.GradientTape | None = None

    def recording(self, fn: Callable) -> Callable:
        """``fn`` run inside a persistent `GradientTape` that `gradients` reads."""
        def recorded(*args: Any) -> Any:
            with tf.GradientTape(persistent=True) as tape:
                outer, self._tape = self._tape, tape
                try:
                    return fn(*args)
                finally:
                    self._tape = outer
        return recorded

    def reset_rng(self) -> None:
        self._gen.reset_from_seed(self._seed)

    # creation and casting
    constant = staticmethod(lambda value, dtype=None: tf.constant(value, dtype=dtype))
    cast = staticmethod(lambda x, dtype: tf.cast(x, dtype))
    zeros = staticmethod(lambda shape, dtype="float32": tf.zeros(shape, dtype=dtype))
    ones = staticmethod(lambda shape, dtype="float32": tf.ones(shape, dtype=dtype))
    zeros_like = staticmethod(tf.zeros_like)
    ones_like = staticmethod(tf.ones_like)

    # shapes
    @staticmethod
    def dim(x: Any, axis: int) -> Any:
        static = x.shape[axis]
        return static if static is not None else tf.shape(x)[axis]

    reshape = staticmethod(lambda x, shape: tf.reshape(x, shape))
    concat = staticmethod(lambda xs, axis=-1: tf.concat(list(xs), axis))
    stack = staticmethod(lambda xs, axis=0: tf.stack(list(xs), axis))
    transpose = staticmethod(lambda x, perm: tf.transpose(x, perm))
    expand_dims = staticmethod(lambda x, axis: tf.expand_dims(x, axis))
    squeeze = staticmethod(lambda x, axis: tf.squeeze(x, axis))

    # math
    matmul = staticmethod(tf.linalg.matmul)
    reduce_sum = staticmethod(lambda x, axis=None, keepdims=False: tf.reduce_sum(x, axis, keepdims))
    reduce_mean = staticmethod(lambda x, axis=None, keepdims=False: tf.reduce_mean(x, axis, keepdims))
    reduce_max = staticmethod(lambda x, axis=None, keepdims=False: tf.reduce_max(x, axis, keepdims))
    reduce_min = staticmethod(lambda x, axis=None, keepdims=False: tf.reduce_min(x, axis, keepdims))
    argmax = staticmethod(lambda x, axis=-1: tf.argmax(x, axis, output_type=tf.int64))
    where = staticmethod(tf.where)
    maximum = staticmethod(tf.maximum)
    minimum = staticmethod(tf.minimum)
    clip = staticmethod(lambda x, low, high: tf.clip_by_value(x, low, high))
    abs = staticmethod(tf.abs)
    exp = staticmethod(tf.exp)
    log = staticmethod(tf.math.log)
    sqrt = staticmethod(tf.sqrt)
    square = staticmethod(tf.square)
    sign = staticmethod(tf.sign)
    equal = staticmethod(tf.equal)
    logical_and = staticmethod(tf.logical_and)
    logical_or = staticmethod(tf.logical_or)
    logical_not = staticmethod(tf.logical_not)
    one_hot = staticmethod(lambda indices, depth, dtype="float32": tf.one_hot(indices, depth, dtype=dtype))
    gather = staticmethod(lambda params, indices, axis=0: tf.gather(params, indices, axis=axis))
    take_along_axis = staticmethod(lambda x, indices, axis: tf.experimental.numpy.take_along_axis(x, indices, axis))
    stop_gradient = staticmethod(tf.stop_gradient)

    # activations
    relu = staticmethod(tf.nn.relu)
    tanh = staticmethod(tf.tanh)
    sigmoid = staticmethod(tf.sigmoid)
    elu = staticmethod(tf.nn.elu)
    softplus = staticmethod(tf.nn.softplus)
    softmax = staticmethod(lambda x, axis=-1: tf.nn.softmax(x, axis=axis))
    log_softmax = staticmethod(lambda x, axis=-1: tf.nn.log_softmax(x, axis=axis))

    def activation(self, name: str | None) -> Callable[[Any], Any]:
        if name in (None, "linear"):
            return lambda x: x
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")
        return getattr(self, name)

    # randomness (seeded per executor)
    def random_uniform(self, shape: Any, low: float = 0.0, high: float = 1.0, dtype: str = "float32") -> Any:
        return self._gen.uniform(shape, low, high, dtype=dtype)

    def random_normal(self, shape: Any, mean: float = 0.0, std: float = 1.0, dtype: str = "float32") -> Any:
        return self._gen.normal(shape, mean, std, dtype=dtype)

    # variables and gradients
    @staticmethod
    def assign(var: tf.Variable, value: Any) -> Any:
        return var.assign(value)

    def gradients(self, loss: Any, variables: Sequence[tf.Variable]) -> list[Any]:
        """d loss / d variable for each variable (zeros where the loss does not depend on it).

        Outside a recording API call (the build's isolated sample runs) there is no
        history to differentiate: the gradients are zeros.
        """
        if self._tape is None:
            return [tf.zeros_like(v) for v in variables]
        with self._tape.stop_recording():
            return self._tape.gradient(loss, list(variables), unconnected_gradients=tf.UnconnectedGradients.ZERO)

    @staticmethod
    def value_and_grad(fn: Callable[[], Any], variables: Sequence[tf.Variable]) -> tuple[Any, list[Any]]:
        with tf.GradientTape() as tape:
            value = fn()
        return value, tape.gradient(value, list(variables))
