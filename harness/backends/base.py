"""The interface every backend implements, and what the two share (initial values)."""

from __future__ import annotations

import abc
import re
import zlib
from typing import Any, Callable

import numpy as np

from harness.backends.ops import ACTIVATIONS, OP_NAMES, Ops
from harness.spaces import BoxSpace, Space


def _glorot_uniform(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if len(shape) < 2:
        fan_in = fan_out = shape[0] if shape else 1
    else:
        receptive = int(np.prod(shape[:-2], dtype=np.int64))
        fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
    limit = np.sqrt(6.0 / max(1, fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape)


_PARAM_INIT = re.compile(r"^(normal|uniform|constant)\(([-+0-9.eE]+)\)$")


def initial_value(path: str, shape: tuple[int, ...], dtype: np.dtype, initializer: Any, seed: int) -> np.ndarray:
    """The initial value of a variable, drawn in NumPy from ``seed`` and the variable's path.

    Seeding by path makes a variable's initial value independent of build order and
    identical on both backends.
    """
    rng = np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(path.encode())])
    if isinstance(initializer, np.ndarray) or np.isscalar(initializer) and not isinstance(initializer, str):
        value = np.broadcast_to(np.asarray(initializer), shape)
    elif callable(initializer):
        value = np.asarray(initializer(shape, rng))
    elif initializer == "zeros":
        value = np.zeros(shape)
    elif initializer == "ones":
        value = np.ones(shape)
    elif initializer == "glorot_uniform":
        value = _glorot_uniform(shape, rng)
    elif isinstance(initializer, str) and _PARAM_INIT.match(initializer):
        kind, arg = _PARAM_INIT.match(initializer).groups()
        a = float(arg)
        value = {"normal": lambda: rng.normal(0.0, a, size=shape),
                 "uniform": lambda: rng.uniform(-a, a, size=shape),
                 "constant": lambda: np.full(shape, a)}[kind]()
    else:
        raise ValueError(
            f"variable {path!r}: unknown initializer {initializer!r}; expected 'zeros', 'ones', 'glorot_uniform', "
            f"'normal(std)', 'uniform(a)', 'constant(c)', an array or fn(shape, rng)"
        )
    if value.shape != tuple(shape):
        raise ValueError(f"variable {path!r}: initializer gave shape {value.shape}, expected {tuple(shape)}")
    return np.array(value, dtype=dtype)


class TraceError(RuntimeError):
    """An API method cannot run as a traced graph (`Backend.trace_api`): its graph depends on values, or it
    writes what it holds."""


class Backend(abc.ABC):
    """One backend (TensorFlow or PyTorch) for one executor: variables, tensors, compiled API calls.

    Args:
        seed: seeds variable initial values and the backend's random ops.
    """

    name: str = ""

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self.ops: Any = None
        #: The NumPy op namespace for graph functions of scalars only (`harness.backends.host_ops.HostOps`),
        #: on backends that run those on the host (`harness.graph.steps.host_step`); None on the others.
        self.host_ops: Any = None
        self.initial_values: dict[str, np.ndarray] = {}

    def initial_value(self, path: str, shape: tuple[int, ...], dtype: np.dtype, initializer: Any) -> np.ndarray:
        """See `initial_value`; remembered so the build can restore it after its sample runs."""
        value = initial_value(path, shape, dtype, initializer, self.seed)
        self.initial_values[path] = value
        return value

    @abc.abstractmethod
    def make_variable(self, path: str, value: np.ndarray, trainable: bool, device: str | None) -> Any:
        """A backend variable holding ``value``."""

    @abc.abstractmethod
    def variable_value(self, var: Any) -> np.ndarray:
        """A NumPy copy of a variable's value."""

    @abc.abstractmethod
    def assign_variable(self, var: Any, value: np.ndarray) -> None:
        """Overwrites a variable with a NumPy value of its shape and dtype."""

    @abc.abstractmethod
    def to_tensor(self, value: np.ndarray) -> Any:
        """A backend tensor from a NumPy array."""

    def feed(self, value: np.ndarray) -> Any:
        """What a compiled API function takes for a NumPy input (a tensor, or the array itself)."""
        return self.to_tensor(value)

    @abc.abstractmethod
    def to_numpy(self, tensor: Any) -> np.ndarray:
        """A NumPy array from a backend tensor."""

    def host_value(self, tensor: Any) -> Any:
        """A scalar tensor's value as a Python number (backends with ``host_ops`` only)."""
        raise NotImplementedError(f"backend {self.name!r} runs no graph functions on the host")

    def from_host(self, value: Any, dtype: np.dtype) -> Any:
        """A scalar tensor of ``dtype`` holding a host value (backends with ``host_ops`` only)."""
        raise NotImplementedError(f"backend {self.name!r} runs no graph functions on the host")

    @abc.abstractmethod
    def is_tensor(self, value: Any) -> bool:
        """Whether ``value`` is a tensor (or variable) of this backend."""

    @abc.abstractmethod
    def tensor_shape_dtype(self, tensor: Any) -> tuple[tuple[int, ...], np.dtype]:
        """The concrete shape and NumPy dtype of an eager tensor."""

    @abc.abstractmethod
    def device_scope(self, device: str | None) -> Any:
        """A context manager placing ops (and variables) on ``device``."""

    @abc.abstractmethod
    def place(self, fn: Callable, device: str) -> Callable:
        """``fn`` wrapped so that its ops (and, where needed, its inputs) are on ``device``."""

    @abc.abstractmethod
    def check_device(self, device: str) -> None:
        """Raises ValueError naming ``device`` if this backend cannot place anything there."""

    @abc.abstractmethod
    def compile_api(self, name: str, fn: Callable, arg_spaces: dict[str, Space], gradients: bool = False) -> Callable:
        """A fast callable for one root API method's flat call chain ``fn``.

        With ``gradients``, the chain runs with gradient recording so that
        ``F.gradients(loss, variables)`` in a later step sees how the loss came
        about; without, no recording (the cheap path for acting).
        """

    def trace_api(self, name: str, chain: Callable, arg_spaces: dict[str, Space], variables: list[Any],
                  where: str = "") -> Callable:
        """``chain`` run as a recorded graph per input shapes, for `GraphExecutor`'s ``trace`` (before `compile_api`).

        By default ``chain`` itself: a backend whose `compile_api` already records a graph (TF's
        ``tf.function``) has nothing to add. PyTorch records a TorchScript graph per input shapes
        (`harness.backends.torch.tracing.TracedApi`).
        """
        return chain

    def check_traceable(self, name: str, chain: Callable, arg_spaces: dict[str, Space], variables: list[Any],
                        where: str = "") -> None:
        """Raises when ``chain`` cannot run as `trace_api`'s graph (the executor calls it at build, while the
        build's sample runs are still to be undone: it may run the chain). Nothing to check by default."""

    #: Whether `replay_api` replays anything: the executor builds a second chain for it only then.
    replays = False

    def replay_api(self, name: str, chain: Callable, fallback: Callable) -> Callable:
        """A method that records no gradients, for `GraphExecutor`'s ``replay`` (before `compile_api`): run as
        replays of the ops ``chain`` (every step on the backend) records on its first calls per input shapes,
        ``fallback`` (its eager chain) where none is kept. By default ``fallback`` itself: TF's ``tf.function``
        is a recorded graph already. PyTorch: `harness.backends.torch.replay.ReplayedApi`."""
        return fallback

    def replay_host(self, fn: Callable) -> Callable:
        """A host step's callable (`harness.graph.steps.host_step`) as the chain `replay_api` records calls it:
        by default ``fn`` itself."""
        return fn

    def execution_callable(self, compiled: Callable) -> Callable:
        """What `GraphExecutor.execute` calls for a compiled API method (`compile_api`'s result): the same
        computation through the backend's cheapest call path; by default ``compiled`` itself."""
        return compiled

    @abc.abstractmethod
    def to_device(self, value: Any, device: str | None = None) -> Any:
        """``value`` as tensors of this backend on ``device``, for staging batches ahead of use.

        ``value`` is an array or tensor, or a dict/tuple/list of them (the structure is
        kept). ``device`` None picks the first GPU when there is one, else the CPU. A
        copy to a GPU is started asynchronously where the backend can (pinned host
        memory on PyTorch), so a background thread can overlap it with compute.
        """

    @abc.abstractmethod
    def reset_rng(self) -> None:
        """Re-seeds the backend's random ops from ``seed`` (after the build's sample runs)."""

    def input_spec(self, space: Space) -> Any:
        """Backend type specs for the values of ``space`` (used for signatures)."""
        raise NotImplementedError


def map_structure(fn: Callable[[Any], Any], value: Any) -> Any:
    """``fn`` applied to every leaf of a nest of dicts, tuples and lists, keeping the structure."""
    if isinstance(value, dict):
        return {k: map_structure(fn, v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(map_structure(fn, v) for v in value)
    return fn(value)


def leaf_spaces(space: Space) -> list[BoxSpace]:
    """The leaf spaces of ``space`` in value-flattening order."""
    return [s for _, s in space.leaves()]  # type: ignore[misc]


#: ``OP_NAMES`` (the op namespace ``F``, derived from the `Ops` protocol) and ``ACTIVATIONS``
#: live in `harness.backends.ops`; re-exported here for existing imports.
__all__ = ["ACTIVATIONS", "Backend", "OP_NAMES", "Ops", "initial_value", "leaf_spaces", "map_structure"]
