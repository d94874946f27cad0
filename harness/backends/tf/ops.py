"""The op namespace ``F`` for graph functions on TensorFlow."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

from harness.backends.ops import ActivationLookup


_TF_PADDING = {"valid": "VALID", "same": "SAME"}


def _last_of_repeats(indices: Any, updates: Any) -> tuple[Any, Any]:
    """``(indices, updates)`` reordered so that every repeat of an index carries the update of its last
    occurrence (fixed sizes, no masks): a scatter of the result is the same whatever order it writes in."""
    order = tf.argsort(indices, stable=True)
    ordered = tf.gather(indices, order)
    previous = tf.concat([ordered[:1] - 1, ordered[:-1]], 0)
    segment = tf.cumsum(tf.cast(tf.not_equal(ordered, previous), tf.int32)) - 1
    last = tf.math.unsorted_segment_max(order, segment, tf.shape(indices)[0])  # stable: the run's last position
    return ordered, tf.gather(updates, tf.gather(last, segment))


class TFOps(ActivationLookup):
    """The op namespace ``F`` implemented with TensorFlow (see `harness.backends.ops.Ops`)."""

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

    @staticmethod
    def arange(n: Any, dtype: Any = "int64") -> Any:
        return tf.range(tf.maximum(tf.cast(n, dtype), 0), dtype=dtype)

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
    pad = staticmethod(lambda x, paddings, value=0: tf.pad(x, [list(p) for p in paddings], constant_values=value))

    # math
    matmul = staticmethod(tf.linalg.matmul)

    @staticmethod
    def dense(x: Any, kernel: Any, bias: Any = None) -> Any:
        out = tf.linalg.matmul(x, kernel)
        return out if bias is None else tf.nn.bias_add(out, bias)
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

    @staticmethod
    def select_last(x: Any, indices: Any) -> Any:
        rank = indices.shape.rank
        if rank is None:  # unknown rank (no signature fixes it): the general form
            return tf.squeeze(tf.experimental.numpy.take_along_axis(x, indices[..., None], -1), -1)
        if indices.dtype not in (tf.int32, tf.int64):
            indices = tf.cast(indices, tf.int64)
        return tf.gather(x, indices, batch_dims=rank)  # one gather, where one_hot, multiply and sum were three ops

    # layers
    @staticmethod
    def conv2d(x: Any, kernel: Any, strides: tuple[int, int] = (1, 1), padding: str = "valid",
               bias: Any = None) -> Any:
        try:
            pad = _TF_PADDING[padding]
        except (KeyError, TypeError):
            raise ValueError(f"F.conv2d: padding must be one of {tuple(_TF_PADDING)}; got {padding!r}") from None
        out = tf.nn.conv2d(x, kernel, strides=[1, strides[0], strides[1], 1], padding=pad)
        return out if bias is None else tf.nn.bias_add(out, bias)  # bias_add: lets oneDNN fuse conv + bias

    @staticmethod
    def max_pool2d(x: Any, pool_size: tuple[int, int] = (2, 2), strides: tuple[int, int] = (2, 2),
                   padding: str = "valid") -> Any:
        try:
            pad = _TF_PADDING[padding]
        except (KeyError, TypeError):
            raise ValueError(f"F.max_pool2d: padding must be one of {tuple(_TF_PADDING)}; got {padding!r}") from None
        return tf.nn.max_pool2d(x, ksize=list(pool_size), strides=list(strides), padding=pad)

    @staticmethod
    def scatter_update(ref: tf.Variable, indices: Any, updates: Any, unique: bool = False) -> None:
        indices = tf.cast(indices, tf.int64)
        updates = tf.cast(updates, ref.dtype)
        if not unique:
            indices, updates = _last_of_repeats(indices, updates)
        ref.scatter_nd_update(tf.expand_dims(indices, 1), updates)

    @staticmethod
    def scan(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any, reverse: bool = False) -> tuple[Any, Any]:
        first = elems[0] if isinstance(elems, (tuple, list)) else elems
        if isinstance(elems, list):
            elems = tuple(elems)

        def run() -> tuple[Any, Any]:
            stacked = tf.scan(fn, elems, initializer=initializer, reverse=reverse)
            return tf.nest.map_structure(lambda s: s[0] if reverse else s[-1], stacked), stacked

        # tf.scan cannot stack zero steps (an empty TensorList of unknown element shape): T = 0 gives the
        # initializer and empty stacks, by a cond when T is only known at run time.
        def empty() -> tuple[Any, Any]:
            return initializer, tf.nest.map_structure(
                lambda c: tf.zeros(tf.concat([[0], tf.shape(c)], 0), c.dtype), initializer)

        steps = first.shape[0]
        if steps is not None:
            return run() if steps > 0 else empty()
        return tf.cond(tf.shape(first)[0] > 0, run, empty)

    # activations
    relu = staticmethod(tf.nn.relu)
    tanh = staticmethod(tf.tanh)
    sigmoid = staticmethod(tf.sigmoid)
    elu = staticmethod(tf.nn.elu)
    softplus = staticmethod(tf.nn.softplus)
    softmax = staticmethod(lambda x, axis=-1: tf.nn.softmax(x, axis=axis))
    log_softmax = staticmethod(lambda x, axis=-1: tf.nn.log_softmax(x, axis=axis))

    # randomness (seeded per executor)
    def random_uniform(self, shape: Any, low: float = 0.0, high: float = 1.0, dtype: str = "float32") -> Any:
        return self._gen.uniform(shape, low, high, dtype=dtype)

    def random_normal(self, shape: Any, mean: float = 0.0, std: float = 1.0, dtype: str = "float32") -> Any:
        return self._gen.normal(shape, mean, std, dtype=dtype)

    def random_integers(self, shape: Any, high: int, dtype: str = "int64") -> Any:
        # Generator.uniform of an integer dtype draws from [minval, maxval); TF documents a slight bias unless
        # the range is a power of two, of the order of range / 2**32, far below what any test here can see.
        return self._gen.uniform(shape, 0, int(high), dtype=dtype)

    def random_bernoulli(self, shape: Any, p: Any) -> Any:
        p = p if isinstance(p, (int, float)) else tf.cast(p, tf.float32)
        return self._gen.uniform(shape, 0.0, 1.0, dtype=tf.float32) < p

    # variables and gradients
    @staticmethod
    def assign(var: tf.Variable, value: Any) -> Any:
        return var.assign(value)

    @staticmethod
    def global_norm(xs: Sequence[Any]) -> Any:
        xs = list(xs)
        return tf.sqrt(tf.add_n([tf.cast(tf.reduce_sum(tf.square(x)), xs[0].dtype) for x in xs]))

    @staticmethod
    def scale_each(xs: Sequence[Any], factor: Any) -> list[Any]:
        return [x * tf.cast(factor, x.dtype) for x in xs]

    @staticmethod
    def adam_update(variables: Sequence[tf.Variable], grads: Sequence[Any], m: Sequence[tf.Variable],
                    v: Sequence[tf.Variable], step: Any, learning_rate: float, beta1: float, beta2: float,
                    epsilon: float) -> None:
        # TF's fused kernel computes w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps_hat): with
        # eps_hat = epsilon * sqrt(1 - b2^t) that is exactly the protocol's epsilon outside sqrt(v_hat).
        t = tf.cast(step, tf.float64)
        p1, p2 = tf.pow(tf.constant(beta1, tf.float64), t), tf.pow(tf.constant(beta2, tf.float64), t)
        eps_hat = epsilon * tf.sqrt(1.0 - p2)
        for var, g, m_, v_ in zip(variables, grads, m, v):
            d = var.dtype
            tf.raw_ops.ResourceApplyAdam(
                var=var.handle, m=m_.handle, v=v_.handle, beta1_power=tf.cast(p1, d), beta2_power=tf.cast(p2, d),
                lr=tf.constant(learning_rate, d), beta1=tf.constant(beta1, d), beta2=tf.constant(beta2, d),
                epsilon=tf.cast(eps_hat, d), grad=tf.cast(g, d))

    @staticmethod
    def rmsprop_update(variables: Sequence[tf.Variable], grads: Sequence[Any], ms: Sequence[tf.Variable],
                       mg: Sequence[tf.Variable] | None, mom: Sequence[tf.Variable] | None, learning_rate: float,
                       decay: float, momentum: float, epsilon: float, epsilon_outside: bool = False) -> None:
        # Elementwise ops inside one tf.function (TF's ResourceApply*RMSProp kernels need a momentum slot and
        # have no max(., 0) guard on the centered variance).
        for i, (var, g) in enumerate(zip(variables, grads)):
            new_ms = ms[i].assign(decay * ms[i] + (1.0 - decay) * tf.square(g))
            if mg is not None:
                new_mg = mg[i].assign(decay * mg[i] + (1.0 - decay) * g)
                v = tf.maximum(new_ms - tf.square(new_mg), 0.0)
            else:
                v = new_ms
            denom = tf.sqrt(v) + epsilon if epsilon_outside else tf.sqrt(v + epsilon)
            if mom is not None:
                var.assign_sub(mom[i].assign(momentum * mom[i] + learning_rate * g / denom))
            else:
                var.assign_sub(learning_rate * g / denom)

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
