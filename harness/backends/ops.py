"""The op namespace ``F`` that graph functions receive: one typed protocol, two implementations.

`Ops` declares every op with its signature and semantics; `harness.backends.tf.ops.TFOps`
and `harness.backends.torch.ops.TorchOps` implement it, and ``suites/backends`` checks
that both implement every name with a matching signature and agree with a NumPy
reference op by op. `OP_NAMES` is derived from the protocol.

Conventions for all ops: ``Tensor`` is the backend's tensor type (a backend variable
is accepted wherever a tensor is read); ``dtype`` is a NumPy dtype name (``"float32"``,
``"int64"``, ``"bool"``), a NumPy dtype or the backend's own dtype; integer results
of index-producing ops are int64; negative axes count from the end; tensors also
support Python arithmetic (``+ - * / // % @``, comparisons, unary ``-``) and basic
slicing (``x[1:]``, ``x[:, 0]``) on both backends.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, runtime_checkable

Tensor = Any
DType = Any


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int, int]:
    """TensorFlow's SAME padding of one spatial axis: ``(out, pad_before, pad_after)``.

    ``out = ceil(size / stride)``; the total padding is ``max((out - 1) * stride +
    kernel - size, 0)``, of which the odd element goes after (bottom/right).
    """
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return out, total // 2, total - total // 2


@runtime_checkable
class Ops(Protocol):
    """Every op of ``F``, with its semantics (both backends implement exactly these)."""

    #: ``"tf"`` or ``"torch"``: for error messages and reports, never for branching in components.
    name: str

    # ---- creation and casting -------------------------------------------------------------------
    def constant(self, value: Any, dtype: DType = None) -> Tensor:
        """A tensor holding ``value`` (a number, nested list or array); ``dtype`` None infers it."""

    def cast(self, x: Any, dtype: DType) -> Tensor:
        """``x`` (a tensor or a Python number) converted to ``dtype``; float to int truncates toward 0."""

    def zeros(self, shape: Sequence[Any], dtype: DType = "float32") -> Tensor:
        """A tensor of zeros of ``shape`` (ints, or on TF scalar int tensors of a dynamic size)."""

    def ones(self, shape: Sequence[Any], dtype: DType = "float32") -> Tensor:
        """A tensor of ones of ``shape`` (as for `zeros`)."""

    def zeros_like(self, x: Tensor) -> Tensor:
        """Zeros of ``x``'s shape and dtype."""

    def ones_like(self, x: Tensor) -> Tensor:
        """Ones of ``x``'s shape and dtype."""

    def arange(self, n: Any, dtype: DType = "int64") -> Tensor:
        """``[0, 1, ..., n - 1]`` of ``dtype``; ``n`` a Python int or a scalar int tensor; empty for ``n <= 0``.

        On PyTorch a tensor ``n`` is read on the host, and the result lies on ``n``'s device.
        """

    # ---- shapes ---------------------------------------------------------------------------------
    def dim(self, x: Tensor, axis: int) -> Any:
        """The size of ``axis``: a Python int when known (always on PyTorch), else a scalar int32 tensor (TF)."""

    def reshape(self, x: Tensor, shape: Sequence[Any]) -> Tensor:
        """``x`` in ``shape`` (one entry may be -1), elements in row-major order."""

    def concat(self, xs: Sequence[Tensor], axis: int = -1) -> Tensor:
        """The tensors ``xs`` joined along the existing ``axis``."""

    def stack(self, xs: Sequence[Tensor], axis: int = 0) -> Tensor:
        """The same-shaped tensors ``xs`` joined along a new ``axis``."""

    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        """``x`` with its axes permuted: output axis ``i`` is input axis ``perm[i]``."""

    def expand_dims(self, x: Tensor, axis: int) -> Tensor:
        """``x`` with a new size-1 axis inserted at ``axis``."""

    def squeeze(self, x: Tensor, axis: int) -> Tensor:
        """``x`` without its size-1 ``axis``."""

    def pad(self, x: Tensor, paddings: Sequence[tuple[int, int]], value: float = 0) -> Tensor:
        """``x`` padded with the constant ``value``: ``paddings[i] = (before, after)`` for every axis ``i`` (ints >= 0)."""

    # ---- math -----------------------------------------------------------------------------------
    def matmul(self, a: Tensor, b: Tensor) -> Tensor:
        """The matrix product over the last two axes (leading axes broadcast), like ``np.matmul``."""

    def dense(self, x: Tensor, kernel: Tensor, bias: Tensor | None = None) -> Tensor:
        """``x @ kernel + bias`` for ``x`` ``[..., n]``, ``kernel`` ``[n, m]``, ``bias`` ``[m]`` or None: a fully
        connected layer's affine part (one fused op where the backend has one)."""

    def reduce_sum(self, x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
        """The sum over ``axis`` (an int, a tuple, or None for all axes)."""

    def reduce_mean(self, x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
        """The mean over ``axis`` (as for `reduce_sum`); float inputs only."""

    def reduce_max(self, x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
        """The maximum over ``axis`` (as for `reduce_sum`)."""

    def reduce_min(self, x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
        """The minimum over ``axis`` (as for `reduce_sum`)."""

    def argmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """The int64 index of the largest value along ``axis`` (the first one of ties)."""

    def where(self, cond: Tensor, a: Any, b: Any) -> Tensor:
        """``a`` where the bool ``cond`` holds, else ``b`` (all three broadcast)."""

    def maximum(self, a: Tensor, b: Any) -> Tensor:
        """The elementwise maximum; ``b`` may be a Python number."""

    def minimum(self, a: Tensor, b: Any) -> Tensor:
        """The elementwise minimum; ``b`` may be a Python number."""

    def clip(self, x: Tensor, low: Any, high: Any) -> Tensor:
        """``x`` limited to ``[low, high]``."""

    def abs(self, x: Tensor) -> Tensor:
        """``|x|`` elementwise."""

    def exp(self, x: Tensor) -> Tensor:
        """``e ** x`` elementwise."""

    def log(self, x: Tensor) -> Tensor:
        """The natural logarithm elementwise."""

    def sqrt(self, x: Tensor) -> Tensor:
        """The square root elementwise."""

    def square(self, x: Tensor) -> Tensor:
        """``x * x`` elementwise."""

    def sign(self, x: Tensor) -> Tensor:
        """-1, 0 or 1 elementwise, in ``x``'s dtype."""

    def equal(self, a: Tensor, b: Tensor) -> Tensor:
        """``a == b`` elementwise, bool."""

    def logical_and(self, a: Tensor, b: Tensor) -> Tensor:
        """Elementwise and of two bool tensors."""

    def logical_or(self, a: Tensor, b: Tensor) -> Tensor:
        """Elementwise or of two bool tensors."""

    def logical_not(self, x: Tensor) -> Tensor:
        """Elementwise not of a bool tensor."""

    def one_hot(self, indices: Tensor, depth: int, dtype: DType = "float32") -> Tensor:
        """``indices`` (ints in ``[0, depth)``) one-hot encoded along a new last axis of size ``depth``."""

    def gather(self, params: Tensor, indices: Tensor, axis: int = 0) -> Tensor:
        """``np.take(params, indices, axis)``: the slices of ``params`` at the int ``indices`` (any shape) along ``axis``."""

    def take_along_axis(self, x: Tensor, indices: Tensor, axis: int) -> Tensor:
        """``np.take_along_axis(x, indices, axis)``: ``indices`` has ``x``'s rank."""

    def select_last(self, x: Tensor, indices: Tensor) -> Tensor:
        """One entry of ``x``'s last axis per position: ``np.take_along_axis(x, indices[..., None], -1)[..., 0]``.

        ``indices`` are ints in ``[0, x.shape[-1])`` of ``x``'s shape without its last axis (the Q-value or
        log-probability of the action taken, per item). Gradients flow to the selected entries of ``x``.
        """

    def stop_gradient(self, x: Tensor) -> Tensor:
        """``x``, through which no gradient flows."""

    # ---- layers ---------------------------------------------------------------------------------
    def conv2d(self, x: Tensor, kernel: Tensor, strides: tuple[int, int] = (1, 1), padding: str = "valid",
               bias: Tensor | None = None) -> Tensor:
        """A 2-D cross-correlation: ``x`` NHWC ``[N,H,W,C]``, ``kernel`` HWIO ``[kh,kw,C,O]`` -> NHWC ``[N,H',W',O]``.

        ``strides`` = ``(sh, sw)``. ``padding`` "valid": none, ``H' = (H - kh) // sh + 1``;
        "same": TensorFlow's SAME (`same_padding`: ``H' = ceil(H / sh)``, the odd padding
        row/column at the bottom/right). ``bias`` ``[O]``, when given, is added to every
        output pixel. Both backends take and return NHWC (PyTorch permutes inside the op).
        """

    def max_pool2d(self, x: Tensor, pool_size: tuple[int, int] = (2, 2), strides: tuple[int, int] = (2, 2),
                   padding: str = "valid") -> Tensor:
        """The maximum over each ``(ph, pw)`` window of NHWC ``x`` ``[N,H,W,C]``, per channel -> ``[N,H',W',C]``.

        ``strides`` = ``(sh, sw)``. ``padding`` "valid": none, ``H' = (H - ph) // sh + 1``; "same":
        TensorFlow's SAME (`same_padding`: ``H' = ceil(H / sh)``, the odd padding row/column at the
        bottom/right), where padded positions never win (they count as minus infinity). The gradient
        flows to the element that won each window.
        """

    def scatter_update(self, ref: Any, indices: Tensor, updates: Tensor, unique: bool = False) -> None:
        """Writes ``ref[indices[k]] = updates[k]`` along axis 0 of the backend variable ``ref``, in place.

        ``indices``: ints ``[K]`` in ``[0, rows)``; ``updates``: ``[K, *ref.shape[1:]]``, cast to
        ``ref``'s dtype. Of repeated indices the LAST update (largest ``k``) wins, on both
        backends. ``unique=True`` is a promise that repeated indices carry equal updates
        (e.g. distinct ring-buffer rows) and skips the work that orders repeats; returns None.
        """

    def scan(self, fn: Callable[[Any, Any], Any], elems: Any, initializer: Any,
             reverse: bool = False) -> tuple[Any, Any]:
        """A loop over axis 0: ``carry = fn(carry, elem_t)`` from ``carry = initializer``.

        ``elems``: a tensor or a tuple of tensors sharing axis 0 of size ``T`` (which may be 0 or,
        on TF, dynamic); ``fn`` receives the element (or tuple of elements) at step ``t``.
        ``initializer``: a tensor or a tuple of tensors; ``fn`` returns the same structure,
        shapes and dtypes. ``reverse`` runs ``t = T-1 .. 0``. Returns ``(final, stacked)``:
        the carry after the last step run (``initializer`` when ``T == 0``), and every carry
        stacked on a new axis 0 in time order (``stacked[t]`` is the carry after step ``t``,
        also when ``reverse``; ``[0, ...]`` when ``T == 0``).
        """

    # ---- activations ----------------------------------------------------------------------------
    def relu(self, x: Tensor) -> Tensor:
        """``max(x, 0)``."""

    def tanh(self, x: Tensor) -> Tensor:
        """The hyperbolic tangent."""

    def sigmoid(self, x: Tensor) -> Tensor:
        """``1 / (1 + exp(-x))``."""

    def elu(self, x: Tensor) -> Tensor:
        """``x`` where ``x > 0``, else ``exp(x) - 1``."""

    def softplus(self, x: Tensor) -> Tensor:
        """``log(1 + exp(x))``."""

    def softmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """``exp(x) / sum(exp(x))`` along ``axis``."""

    def log_softmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """``log(softmax(x, axis))``, computed stably."""

    def activation(self, name: str | None) -> Callable[[Tensor], Tensor]:
        """The activation op named ``name`` (one of `ACTIVATIONS`; None or "linear": identity); ValueError otherwise."""

    # ---- randomness (seeded per executor) -------------------------------------------------------
    def random_uniform(self, shape: Any, low: float = 0.0, high: float = 1.0, dtype: DType = "float32") -> Tensor:
        """Uniform samples in ``[low, high)`` of ``shape`` from the executor's seeded generator."""

    def random_normal(self, shape: Any, mean: float = 0.0, std: float = 1.0, dtype: DType = "float32") -> Tensor:
        """Normal samples of ``shape`` from the executor's seeded generator."""

    def random_integers(self, shape: Any, high: int, dtype: DType = "int64") -> Tensor:
        """Integers drawn uniformly from ``0 .. high - 1`` (``high >= 1``; ``dtype`` int32 or int64) of ``shape``
        from the executor's seeded generator."""

    def random_bernoulli(self, shape: Any, p: Any) -> Tensor:
        """Booleans of ``shape``, each True with probability ``p`` (a Python float or a float scalar tensor in
        ``[0, 1]``), from the executor's seeded generator: ``random_uniform(shape) < p`` in one op where a
        backend has one (an epsilon-greedy coin)."""

    # ---- variables and gradients ----------------------------------------------------------------
    def assign(self, var: Any, value: Any) -> Any:
        """Overwrites the backend variable ``var`` with ``value`` (its shape; cast by the backend rules)."""

    def global_norm(self, xs: Sequence[Tensor]) -> Tensor:
        """``sqrt(sum_i sum(x_i ** 2))`` over a non-empty list of float tensors (gradients): a scalar in the
        first tensor's dtype (each tensor's sum of squares is taken in its own dtype)."""

    def scale_each(self, xs: Sequence[Tensor], factor: Tensor) -> list[Tensor]:
        """``[x * factor for x in xs]``, the float scalar tensor ``factor`` cast to each ``x``'s dtype (one
        multi-tensor op where the backend has one)."""

    def adam_update(self, variables: Sequence[Any], grads: Sequence[Tensor], m: Sequence[Any], v: Sequence[Any],
                    step: Tensor, learning_rate: float, beta1: float, beta2: float, epsilon: float) -> None:
        """One Adam step (Kingma & Ba, 2015, Algorithm 1) in place, fused per backend.

        For each backend variable ``w`` of ``variables`` with gradient ``g`` and moment slots ``m``,
        ``v`` (backend variables of ``w``'s shape and dtype), at step ``t`` = ``step`` (a scalar
        tensor >= 1, the step being taken)::

            m <- beta1 * m + (1 - beta1) * g
            v <- beta2 * v + (1 - beta2) * g^2
            w <- w - learning_rate * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)

        ``epsilon`` sits outside the square root of the bias-corrected ``v``. Returns None.
        """

    def rmsprop_update(self, variables: Sequence[Any], grads: Sequence[Tensor], ms: Sequence[Any],
                       mg: Sequence[Any] | None, mom: Sequence[Any] | None, learning_rate: float, decay: float,
                       momentum: float, epsilon: float, epsilon_outside: bool = False) -> None:
        """One RMSProp step in TensorFlow 1's form (epsilon inside the square root; ``epsilon_outside``:
        PyTorch's, added to the root) in place, fused per backend.

        For each backend variable ``w`` with gradient ``g`` and slots ``ms`` (and ``mg`` when
        centered, ``mom`` when ``momentum > 0``; None otherwise), ``rho`` = ``decay``::

            ms <- rho * ms + (1 - rho) * g^2
            mg <- rho * mg + (1 - rho) * g                        # mg given: centered
            v = ms  or  max(ms - mg^2, 0)                         # centered
            denom = sqrt(v + epsilon)  or  sqrt(v) + epsilon      # epsilon_outside
            mom <- momentum * mom + learning_rate * g / denom;  w <- w - mom     # mom given
            w <- w - learning_rate * g / denom                                  # mom None

        Returns None.
        """

    def gradients(self, loss: Tensor, variables: Sequence[Any]) -> list[Tensor]:
        """``d loss / d variable`` for each variable, zeros where the loss does not depend on it (see `Backend.compile_api`)."""

    def value_and_grad(self, fn: Callable[[], Tensor], variables: Sequence[Any]) -> tuple[Tensor, list[Tensor]]:
        """``(fn(), d fn() / d variables)`` for a graph function that computes its own loss."""


def _op_names() -> tuple[str, ...]:
    methods = [k for k, v in vars(Ops).items() if not k.startswith("_") and callable(v)]
    return ("name", *methods)


#: The names of ``F``'s ops, in declaration order (derived from `Ops`).
OP_NAMES: tuple[str, ...] = _op_names()

#: The activation names `Ops.activation` knows.
ACTIVATIONS = ("linear", "relu", "tanh", "sigmoid", "elu", "softplus")


class ActivationLookup:
    """``activation(name)`` for an op namespace: the identity for ``None`` or ``"linear"``, else the
    namespace's own op of that name (one of `ACTIVATIONS`)."""

    def activation(self, name: str | None) -> Callable[[Any], Any]:
        if name in (None, "linear"):
            return lambda x: x
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")
        return getattr(self, name)
