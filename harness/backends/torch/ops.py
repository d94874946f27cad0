"""The op namespace ``F`` for graph functions on PyTorch."""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch.optim.adam import adam as torch_adam

from harness.backends.ops import ActivationLookup, same_padding


_TORCH_DTYPES: dict[Any, Any] = {}
_INDEX_DTYPES = (torch.int64, torch.int32)
#: Random draws name the CPU with this object: a device string is parsed on every call (~0.15 us of a ~2 us draw).
_CPU = torch.device("cpu")


def _dt(dtype: Any) -> Any:
    """The torch dtype for a dtype name, NumPy dtype or torch dtype (memoised: it runs on every op call)."""
    if isinstance(dtype, torch.dtype) or dtype is None:
        return dtype
    try:
        return _TORCH_DTYPES[dtype]
    except (KeyError, TypeError):
        found = getattr(torch, np.dtype(dtype).name)
        try:
            _TORCH_DTYPES[dtype] = found
        except TypeError:  # unhashable dtype-like: not memoised
            pass
        return found


def _same_kind_number(value: Any, like: Any) -> bool:
    """Whether ``value`` is a Python number that ``like``'s dtype holds as it is (a float for a float tensor,
    an int for an integer tensor; never a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return like.dtype.is_floating_point if isinstance(value, float) else not like.dtype.is_floating_point \
        and like.dtype is not torch.bool


def _tensor_like(value: Any, like: Any) -> Any:
    return value if isinstance(value, torch.Tensor) else torch.as_tensor(value, dtype=like.dtype, device=like.device)


#: (id(Parameter), memory format) -> (a weak reference to it, its version, its data pointer, its OIHW copy):
#: see `_oihw`. Keyed by id (tensors compare elementwise, so they cannot be dict keys); the entries go when
#: their Parameter is collected.
_OIHW_CACHE: dict[tuple[int, bool], tuple[Any, int, int, Any]] = {}


def _drop_oihw(key: int) -> None:
    for channels_last in (False, True):
        _OIHW_CACHE.pop((key, channels_last), None)


_tracing = torch._C._get_tracing_state  # ~0.1 us; None outside torch.jit.trace


def _oihw(kernel: Any, channels_last: bool = False) -> Any:
    """An HWIO convolution kernel as the OIHW weight ``conv2d`` takes, in the images' memory format.

    ``kernel.permute(3, 2, 0, 1)`` is a view, which the convolution copies into the layout it computes in on
    every call: OIHW for NCHW images, OHWI (channels-last) for channels-last ones, which NHWC images permuted
    to NCHW are. That copy was ~8% of a batch-1 Nature-CNN pass. Outside gradient recording a kernel variable
    (a Parameter) keeps its copy in the layout its images want, made again only when the variable changed
    since (an optimizer step or an assignment bumps its version counter; a new storage changes its data
    pointer). Under recording the view is used, so gradients reach the variable; and while tracing
    (`harness.backends.torch.tracing`), so the traced graph reads the variable itself: a graph holding the
    copy would keep reading it after the variable changed.
    """
    if not isinstance(kernel, torch.nn.Parameter) or torch.is_grad_enabled() or _tracing():
        return kernel.permute(3, 2, 0, 1)
    key, version, pointer = (id(kernel), channels_last), kernel._version, kernel.data_ptr()
    hit = _OIHW_CACHE.get(key)
    if hit is not None and hit[0]() is kernel and hit[1] == version and hit[2] == pointer:
        return hit[3]
    weight = kernel.detach().permute(3, 2, 0, 1).contiguous(
        memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    _OIHW_CACHE[key] = (weakref.ref(kernel, lambda _, k=key[0]: _drop_oihw(k)), version, pointer, weight)
    return weight


@functools.lru_cache(maxsize=256)
def _window_padding(op: str, padding: str, h: int, w: int, kh: int, kw: int, sh: int,
                    sw: int) -> tuple[Any, tuple[int, ...]]:
    """``(op_padding, explicit_pad)`` for the windowed ops (`TorchOps.conv2d`, `TorchOps.max_pool2d`, named by
    ``op`` in errors): symmetric padding goes to the op itself, asymmetric SAME padding to an explicit
    ``F.pad`` (left, right, top, bottom) before it."""
    if padding == "valid":
        return 0, ()
    if padding != "same":
        raise ValueError(f"F.{op}: padding must be one of ('valid', 'same'); got {padding!r}")
    (_, top, bottom), (_, left, right) = same_padding(h, kh, sh), same_padding(w, kw, sw)
    if top == bottom and left == right:
        return (top, left), ()
    return 0, (left, right, top, bottom)


def _last_of_repeats(indices: Any, updates: Any) -> tuple[Any, Any]:
    """``(indices, updates)`` reordered so that every repeat of an index carries the update of its last
    occurrence (fixed sizes, no masks, no host sync): a scatter of the result is order-independent."""
    ordered, order = torch.sort(indices, stable=True)
    previous = torch.cat([ordered[:1] - 1, ordered[:-1]])
    segment = torch.cumsum(ordered != previous, 0) - 1
    last = torch.zeros_like(order).scatter_reduce_(0, segment, order, "amax", include_self=False)
    return ordered, updates[last[segment]]


class TorchOps(ActivationLookup):
    """The op namespace ``F`` implemented with PyTorch (see `harness.backends.ops.Ops`)."""

    name = "torch"

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._gen = torch.Generator().manual_seed(seed)

    def reset_rng(self) -> None:
        self._gen.manual_seed(self._seed)

    # creation and casting
    constant = staticmethod(lambda value, dtype=None: torch.as_tensor(value, dtype=_dt(dtype)))
    cast = staticmethod(lambda x, dtype: x.to(_dt(dtype)) if isinstance(x, torch.Tensor)
                        else torch.as_tensor(x, dtype=_dt(dtype)))
    zeros = staticmethod(lambda shape, dtype="float32": torch.zeros(tuple(shape), dtype=_dt(dtype)))
    ones = staticmethod(lambda shape, dtype="float32": torch.ones(tuple(shape), dtype=_dt(dtype)))
    zeros_like = staticmethod(torch.zeros_like)
    ones_like = staticmethod(torch.ones_like)

    @staticmethod
    def arange(n: Any, dtype: Any = "int64") -> Any:
        device = n.device if isinstance(n, torch.Tensor) else None
        return torch.arange(max(int(n), 0), dtype=_dt(dtype), device=device)

    # shapes
    dim = staticmethod(lambda x, axis: x.shape[axis])
    reshape = staticmethod(lambda x, shape: torch.reshape(x, tuple(int(s) for s in shape)))
    concat = staticmethod(lambda xs, axis=-1: torch.cat(list(xs), axis))
    stack = staticmethod(lambda xs, axis=0: torch.stack(list(xs), axis))
    transpose = staticmethod(lambda x, perm: x.permute(*perm))
    expand_dims = staticmethod(lambda x, axis: torch.unsqueeze(x, axis))
    squeeze = staticmethod(lambda x, axis: torch.squeeze(x, axis))

    @staticmethod
    def pad(x: Any, paddings: Sequence[tuple[int, int]], value: float = 0) -> Any:
        flat = [int(v) for before_after in reversed(list(paddings)) for v in before_after]  # last axis first
        return torch.nn.functional.pad(x, flat, value=value)

    # math
    matmul = staticmethod(torch.matmul)

    @staticmethod
    def dense(x: Any, kernel: Any, bias: Any = None) -> Any:
        # addmm is the matmul and the bias add in one op (a [B, n] batch, the common case); other ranks broadcast
        if bias is None:
            return torch.matmul(x, kernel)
        if x.dim() == 2:
            return torch.addmm(bias, x, kernel)
        return torch.matmul(x, kernel) + bias

    @staticmethod
    def _reduce(fn: Callable, x: Any, axis: Any, keepdims: bool) -> Any:
        if axis is None:
            out = fn(x)
            return out.reshape((1,) * x.dim()) if keepdims else out
        return fn(x, dim=axis, keepdim=keepdims)

    def reduce_sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        if axis is not None:  # the common case without the `_reduce` call (a dueling head's mean runs every act)
            return torch.sum(x, dim=axis, keepdim=keepdims)
        return self._reduce(torch.sum, x, axis, keepdims)

    def reduce_mean(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        if axis is not None:
            return torch.mean(x, dim=axis, keepdim=keepdims)
        return self._reduce(torch.mean, x, axis, keepdims)

    def reduce_max(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce(torch.amax, x, axis if axis is not None else tuple(range(x.dim())), keepdims)

    def reduce_min(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce(torch.amin, x, axis if axis is not None else tuple(range(x.dim())), keepdims)

    argmax = staticmethod(lambda x, axis=-1: torch.argmax(x, dim=axis))

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        return torch.where(cond, a, b)

    @staticmethod
    def maximum(a: Any, b: Any) -> Any:
        # A Python number of the tensor's kind is a clamp: one op, no scalar tensor made per call.
        if _same_kind_number(b, a):
            return torch.clamp(a, min=b)
        return torch.maximum(a, _tensor_like(b, a))

    @staticmethod
    def minimum(a: Any, b: Any) -> Any:
        if _same_kind_number(b, a):
            return torch.clamp(a, max=b)
        return torch.minimum(a, _tensor_like(b, a))
    clip = staticmethod(lambda x, low, high: torch.clamp(x, low, high))
    abs = staticmethod(torch.abs)
    exp = staticmethod(torch.exp)
    log = staticmethod(torch.log)
    sqrt = staticmethod(torch.sqrt)
    square = staticmethod(torch.square)
    sign = staticmethod(torch.sign)
    equal = staticmethod(torch.eq)
    logical_and = staticmethod(torch.logical_and)
    logical_or = staticmethod(torch.logical_or)
    logical_not = staticmethod(torch.logical_not)

    @staticmethod
    def one_hot(indices: Any, depth: int, dtype: str = "float32") -> Any:
        return torch.nn.functional.one_hot(indices.long(), depth).to(_dt(dtype))

    @staticmethod
    def gather(params: Any, indices: Any, axis: int = 0) -> Any:
        if axis == 0 and indices.dim() == 1 and indices.dtype in _INDEX_DTYPES:
            return torch.index_select(params, 0, indices)  # the common case, without reshapes
        axis %= params.dim()
        return torch.index_select(params, axis, indices.long().reshape(-1)).reshape(
            tuple(params.shape[:axis]) + tuple(indices.shape) + tuple(params.shape[axis + 1:]))

    take_along_axis = staticmethod(lambda x, indices, axis: torch.take_along_dim(x, indices.long(), dim=axis))
    stop_gradient = staticmethod(lambda x: x.detach())

    @staticmethod
    def select_last(x: Any, indices: Any) -> Any:
        # One gather, where one_hot (which reads the indices' range back), a multiply and a sum were three ops.
        if indices.dtype != torch.int64:
            indices = indices.long()
        return torch.gather(x, -1, indices.unsqueeze(-1)).squeeze(-1)

    # layers
    @staticmethod
    def conv2d(x: Any, kernel: Any, strides: tuple[int, int] = (1, 1), padding: str = "valid",
               bias: Any = None) -> Any:
        # NHWC/HWIO in and out: the permutes are views (the input becomes a channels-last NCHW tensor,
        # which the convolution keeps), so no layout copy is made on either side.
        if padding == "valid":
            conv_pad, explicit = 0, ()
        else:
            conv_pad, explicit = _window_padding("conv2d", padding, x.shape[1], x.shape[2], kernel.shape[0],
                                                 kernel.shape[1], strides[0], strides[1])
        images = x.permute(0, 3, 1, 2)
        if explicit:
            images = torch.nn.functional.pad(images, explicit)
        weight = _oihw(kernel, images.dim() == 4 and images.is_contiguous(memory_format=torch.channels_last))
        out = torch.nn.functional.conv2d(images, weight, bias, stride=strides, padding=conv_pad)
        return out.permute(0, 2, 3, 1)

    @staticmethod
    def max_pool2d(x: Any, pool_size: tuple[int, int] = (2, 2), strides: tuple[int, int] = (2, 2),
                   padding: str = "valid") -> Any:
        pool_pad, explicit = _window_padding("max_pool2d", padding, x.shape[1], x.shape[2], pool_size[0],
                                             pool_size[1], strides[0], strides[1])
        images = x.permute(0, 3, 1, 2)
        if explicit:  # uneven SAME padding: padded with -inf, as max_pool2d pads its own, so padding never wins
            images = torch.nn.functional.pad(images, explicit, value=float("-inf"))
        out = torch.nn.functional.max_pool2d(images, kernel_size=tuple(pool_size), stride=tuple(strides),
                                             padding=pool_pad)
        return out.permute(0, 2, 3, 1)

    @staticmethod
    def scatter_update(ref: Any, indices: Any, updates: Any, unique: bool = False) -> None:
        if indices.dtype != torch.int64:
            indices = indices.long()
        if updates.dtype != ref.dtype:
            updates = updates.to(ref.dtype)
        if not unique:
            indices, updates = _last_of_repeats(indices, updates)
        if not torch.is_grad_enabled():  # API calls run under no_grad unless recording: skip the context
            ref.index_copy_(0, indices, updates)
            return
        with torch.no_grad():
            ref.index_copy_(0, indices, updates)

    @staticmethod
    def scan(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any, reverse: bool = False) -> tuple[Any, Any]:
        nested = isinstance(elems, (tuple, list))
        steps = int((elems[0] if nested else elems).shape[0])
        carry = initializer
        carries: list[Any] = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            carry = fn(carry, tuple(e[t] for e in elems) if nested else elems[t])
            carries[t] = carry
        if isinstance(initializer, (tuple, list)):
            if not steps:
                return carry, tuple(c.new_zeros((0, *c.shape)) for c in initializer)
            return carry, tuple(torch.stack([c[i] for c in carries]) for i in range(len(initializer)))
        return carry, torch.stack(carries) if steps else initializer.new_zeros((0, *initializer.shape))

    # activations
    relu = staticmethod(torch.relu)
    tanh = staticmethod(torch.tanh)
    sigmoid = staticmethod(torch.sigmoid)
    elu = staticmethod(torch.nn.functional.elu)
    softplus = staticmethod(torch.nn.functional.softplus)
    softmax = staticmethod(lambda x, axis=-1: torch.softmax(x, dim=axis))
    log_softmax = staticmethod(lambda x, axis=-1: torch.log_softmax(x, dim=axis))

    # randomness (seeded per executor): drawn by the CPU generator, then moved to the device the step runs on
    # (a step placed on a GPU creates its tensors there), so a seed gives the same draws on every device
    def _drawn(self, sample: Any) -> Any:
        # No torch-function mode active means no device context (`with device:` or set_default_device): the
        # default device is the CPU. That check costs ~0.05 us; get_default_device ~4 us per draw.
        if not torch._C._len_torch_function_stack():
            return sample
        device = torch.get_default_device()
        return sample if device.type == "cpu" else sample.to(device)

    def random_uniform(self, shape: Any, low: float = 0.0, high: float = 1.0, dtype: str = "float32") -> Any:
        # One call: rand for [0, 1) (PyTorch's rand is empty().uniform_(0, 1): the same draws), uniform_ for
        # another range directly (rand, a multiply and an add were three ops). The dtype lookup and the device
        # check of `_drawn` are written out here and in `random_integers`: an exploring act draws twice a call,
        # and inside a CartPole worker each Python call on the way cost about a microsecond a step.
        size = tuple(map(int, shape))
        dt = _TORCH_DTYPES.get(dtype) if type(dtype) is str else None
        if dt is None:
            dt = _dt(dtype)
        if low == 0.0 and high == 1.0:
            u = torch.rand(size, generator=self._gen, dtype=dt, device=_CPU)
        else:
            u = torch.empty(size, dtype=dt, device=_CPU).uniform_(low, high, generator=self._gen)
        return u if not torch._C._len_torch_function_stack() else self._drawn(u)

    def random_integers(self, shape: Any, high: int, dtype: str = "int64") -> Any:
        # One op, where a uniform draw scaled, cast and clamped into range was four.
        dt = _TORCH_DTYPES.get(dtype) if type(dtype) is str else None
        if dt is None:
            dt = _dt(dtype)
        r = torch.randint(0, int(high), tuple(map(int, shape)), generator=self._gen, dtype=dt, device=_CPU)
        return r if not torch._C._len_torch_function_stack() else self._drawn(r)

    def random_bernoulli(self, shape: Any, p: Any) -> Any:
        # One op, bernoulli_ into a bool tensor, where rand and a comparison were two; comparing with a Python float
        # also wraps it in a tensor on every call (about 2 us of a 1-env act). Inside a CartPole worker's loop
        # the act took about 7 us a step less (reports/profiles/scripts/sampling_variants.py).
        if not isinstance(p, torch.Tensor):
            p = float(p)  # a NumPy scalar too (bernoulli_ takes a Python float or a tensor)
        elif not p.is_cpu:  # a probability computed on a device: the draw is made on the CPU
            p = p.cpu()
        mask = torch.empty(tuple(map(int, shape)), dtype=torch.bool, device=_CPU).bernoulli_(p, generator=self._gen)
        return mask if not torch._C._len_torch_function_stack() else self._drawn(mask)

    def random_normal(self, shape: Any, mean: float = 0.0, std: float = 1.0, dtype: str = "float32") -> Any:
        n = torch.randn(tuple(map(int, shape)), generator=self._gen, dtype=_dt(dtype), device=_CPU)
        return self._drawn(n) * std + mean

    # variables and gradients
    @staticmethod
    def assign(var: Any, value: Any) -> Any:
        if not torch.is_grad_enabled():  # API calls run under no_grad unless recording: skip the context
            return var.copy_(value)
        with torch.no_grad():
            return var.copy_(value)

    @staticmethod
    def global_norm(xs: Sequence[Any]) -> Any:
        # Two multi-tensor ops (each tensor's norm, then the norm of the norms) where a square, a sum and a
        # cast per tensor were 3n.
        xs = list(xs)
        dtype = xs[0].dtype
        norms = torch._foreach_norm(xs)
        if any(n.dtype != dtype for n in norms):
            norms = [n.to(dtype) for n in norms]
        return torch.linalg.vector_norm(torch.stack(norms))

    @staticmethod
    def scale_each(xs: Sequence[Any], factor: Any) -> list[Any]:
        xs = list(xs)
        if all(x.dtype == factor.dtype for x in xs):
            return list(torch._foreach_mul(xs, factor))  # one multi-tensor op
        return [x * factor.to(x.dtype) for x in xs]

    @staticmethod
    def adam_update(variables: Sequence[Any], grads: Sequence[Any], m: Sequence[Any], v: Sequence[Any], step: Any,
                    learning_rate: float, beta1: float, beta2: float, epsilon: float) -> None:
        # PyTorch's own Adam kernels (fused on CPU and CUDA: one pass over each variable instead of a dozen
        # elementwise ops with their temporaries).
        variables = list(variables)
        first = variables[0]
        if first.device.type in ("cpu", "cuda") and all(
                x.dtype == first.dtype and x.device == first.device for x in variables):
            # One device and dtype (the common case): the fused kernel itself. It reads each variable's step
            # tensor (the step being taken, a float on the variables' device) and writes none, so one tensor
            # serves them all, without torch's per-call grouping, copies and count-up of the steps.
            t = step.detach().to(dtype=torch.float32, device=first.device)
            with torch.no_grad():
                torch._fused_adam_(variables, list(grads), list(m), list(v), [], [t] * len(variables),
                                   amsgrad=False, lr=learning_rate, beta1=beta1, beta2=beta2, weight_decay=0.0,
                                   eps=epsilon, maximize=False)
            return
        # Otherwise torch's functional Adam groups them. It takes per-variable float step tensors counting the
        # steps taken before this one, and counts them up itself: fresh copies, the caller's step untouched.
        before = step.detach().to(torch.float32) - 1.0
        steps = [before.clone() for _ in variables]
        fused = all(t.device.type in ("cpu", "cuda") for t in variables)
        with torch.no_grad():
            torch_adam(list(variables), list(grads), list(m), list(v), [], steps, foreach=not fused, fused=fused,
                       amsgrad=False, beta1=beta1, beta2=beta2, lr=learning_rate, weight_decay=0.0, eps=epsilon,
                       maximize=False)

    @staticmethod
    def rmsprop_update(variables: Sequence[Any], grads: Sequence[Any], ms: Sequence[Any], mg: Sequence[Any] | None,
                       mom: Sequence[Any] | None, learning_rate: float, decay: float, momentum: float,
                       epsilon: float, epsilon_outside: bool = False) -> None:
        # torch.optim.RMSprop puts epsilon outside the square root (epsilon_outside); TF1's form, epsilon inside,
        # is the default. Both written with multi-tensor ops.
        variables, grads, ms = list(variables), list(grads), list(ms)
        with torch.no_grad():
            torch._foreach_mul_(ms, decay)
            torch._foreach_addcmul_(ms, grads, grads, 1.0 - decay)
            if mg is not None:
                mg = list(mg)
                torch._foreach_lerp_(mg, grads, 1.0 - decay)
                denom = torch._foreach_addcmul(ms, mg, mg, -1.0)
                torch._foreach_clamp_min_(denom, 0.0)
                if epsilon_outside:
                    torch._foreach_sqrt_(denom)
                else:
                    torch._foreach_add_(denom, epsilon)
            elif epsilon_outside:
                denom = torch._foreach_sqrt(ms)
            else:
                denom = torch._foreach_add(ms, epsilon)
            if epsilon_outside:
                torch._foreach_add_(denom, epsilon)
            else:
                torch._foreach_sqrt_(denom)
            if mom is not None:
                mom = list(mom)
                torch._foreach_mul_(mom, momentum)
                torch._foreach_addcdiv_(mom, grads, denom, learning_rate)
                torch._foreach_sub_(variables, mom)
            else:
                torch._foreach_addcdiv_(variables, grads, denom, -learning_rate)

    @staticmethod
    def gradients(loss: Any, variables: Sequence[Any]) -> list[Any]:
        """d loss / d variable for each variable (zeros where the loss does not depend on it).

        Outside a recording API call (the build's isolated sample runs) the loss has
        no history: the gradients are zeros.
        """
        variables = list(variables)
        if not loss.requires_grad:
            return [torch.zeros_like(v) for v in variables]
        grads = torch.autograd.grad(loss, variables, allow_unused=True, retain_graph=True)
        return [g if g is not None else torch.zeros_like(v) for g, v in zip(grads, variables)]

    @staticmethod
    def value_and_grad(fn: Callable[[], Any], variables: Sequence[Any]) -> tuple[Any, list[Any]]:
        if torch.is_inference_mode_enabled():
            # an API method without recording steps runs in inference mode, where nothing can be recorded; the
            # build saw no value_and_grad in the calling graph function's own code (it came through a helper)
            raise RuntimeError("F.value_and_grad was called in an API method that runs without gradient "
                               "recording: declare @graph_fn(gradients=True) on the graph function that calls "
                               "it (the build only sees value_and_grad written in the function itself)")
        with torch.enable_grad():
            value = fn()
            grads = torch.autograd.grad(value, list(variables), allow_unused=True)
        return value.detach(), [g if g is not None else torch.zeros_like(v) for g, v in zip(grads, variables)]
