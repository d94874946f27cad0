"""Small components for testing the spec checks: correct ones, and ones broken in exactly one way each.

Each broken component names, in its docstring, the check that must catch it.
Oracles and NumPy models for the specs under ``suites/harness/broken/specs`` and
``suites/harness/specs_ok`` live here too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, Space


# ---- elementwise affine: the correct reference and its broken variants ---------------------------


class Affine(Component):
    """``inputs * scale + shift`` per feature; accepts ``float32[B,n]`` only (correct)."""

    def __init__(self, scope: str = "affine") -> None:
        super().__init__(scope=scope)
        self.scale: Any = None
        self.shift: Any = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        space = input_spaces["inputs"]
        if not (isinstance(space, FloatBox) and space.has_batch_rank and not space.has_time_rank and space.rank == 1):
            raise self.space_mismatch("inputs", "float*[B,n]", space)

    def scale_initializer(self) -> Any:
        return "normal(1.0)"

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        n = input_spaces["inputs"].shape[0]
        self.scale = self.get_variable("scale", (n,), initializer=self.scale_initializer())
        self.shift = self.get_variable("shift", (n,), initializer="normal(0.5)")

    @api
    def apply(self, inputs: Any) -> Any:
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        return inputs * self.scale + self.shift


def affine_apply(inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray], config: dict) -> np.ndarray:
    """Oracle of `Affine.apply`."""
    return inputs["inputs"] * weights["scale"] + weights["shift"]


class OffsetAffine(Affine):
    """Adds 1e-3 more than its oracle says: the ``oracle`` check must fail."""

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        return inputs * self.scale + self.shift + 1e-3


class TorchDriftAffine(Affine):
    """Its ``.torch`` body adds 1e-4: the ``parity`` check must fail (and ``oracle`` on torch)."""

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        return inputs * self.scale + self.shift

    @_graph_fn_apply.torch
    def _graph_fn_apply_torch(self, F: Any, inputs: Any) -> Any:
        return inputs * self.scale + self.shift + 1e-4


def _unseeded(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return np.random.default_rng().normal(1.0, 1.0, size=shape)  # ignores the seeded rng on purpose


class UnseededAffine(Affine):
    """Initialises ``scale`` from fresh entropy, not the seeded rng: the ``determinism`` check must fail."""

    def scale_initializer(self) -> Any:
        return _unseeded


class KeepAll(Component):
    """Meant to keep the first three features, returns all of them: the ``build`` check must fail."""

    def __init__(self, scope: str = "keep") -> None:
        super().__init__(scope=scope)

    @api
    def apply(self, inputs: Any) -> Any:
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        return inputs * 1.0


class TanhSquash(Component):
    """Declared to squash into ``(0, 1)`` like a sigmoid, uses tanh: the ``in-space`` check must fail."""

    def __init__(self, scope: str = "squash") -> None:
        super().__init__(scope=scope)

    @api
    def apply(self, inputs: Any) -> Any:
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        return F.tanh(inputs)


class Sqrt(Component):
    """``sqrt(inputs - 0.5)``: NaN below 0.5, which the ``in-space`` check rejects unless the spec allows NaN.

    The shift keeps subnormals away from the square root: TF's CPU kernels flush
    them to zero (``sqrt(-1e-45)`` is -0.0 there, NaN in torch), which ``parity``
    would rightly report.
    """

    def __init__(self, scope: str = "sqrt") -> None:
        super().__init__(scope=scope)

    @api
    def apply(self, inputs: Any) -> Any:
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        return F.sqrt(inputs - 0.5)


class Doubler(Component):
    """``inputs + inputs`` without checking its input space: the ``bad-spaces`` check must fail."""

    def __init__(self, scope: str = "doubler") -> None:
        super().__init__(scope=scope)

    @api
    def apply(self, inputs: Any) -> Any:
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        return inputs + inputs


# ---- constructor arguments ------------------------------------------------------------------------------


class Scale(Component):
    """``inputs * factor``, clipped to ``[-clip, clip]`` when ``clip`` is given; refuses bad arguments (correct)."""

    def __init__(self, factor: float = 2.0, clip: float | None = None, scope: str = "scale") -> None:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
            raise ValueError(f"Scale: factor must be a positive number; got {factor!r}")
        if clip is not None and not clip > 0:
            raise ValueError(f"Scale: clip must be None or positive; got {clip!r}")
        super().__init__(scope=scope)
        self.factor, self.clip = float(factor), clip

    @api
    def apply(self, inputs: Any) -> Any:
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        out = inputs * self.factor
        return out if self.clip is None else F.clip(out, -self.clip, self.clip)


class UncheckedScale(Scale):
    """Accepts a negative ``clip`` and refuses ``factor`` without naming it: the ``bad-configs`` check must fail."""

    def __init__(self, factor: float = 2.0, clip: float | None = None, scope: str = "scale") -> None:
        if factor <= 0:
            raise ValueError(f"UncheckedScale: must be positive; got {factor!r}")
        Component.__init__(self, scope=scope)
        self.factor, self.clip = float(factor), clip


# ---- random outputs -----------------------------------------------------------------------------------


class GaussianNoise(Component):
    """``inputs + N(0, std)`` (correct); stochastic, compared by statistics."""

    def __init__(self, std: float = 1.0, scope: str = "noise") -> None:
        super().__init__(scope=scope)
        self.std = float(std)

    @api
    def apply(self, inputs: Any) -> Any:
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        return inputs + F.random_normal((F.dim(inputs, 0), F.dim(inputs, 1)), 0.0, self.std)


class BiasedNoise(GaussianNoise):
    """Its ``.torch`` noise has mean 1: the statistical ``parity`` check must fail."""

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        return inputs + F.random_normal((F.dim(inputs, 0), F.dim(inputs, 1)), 0.0, self.std)

    @_graph_fn_apply.torch
    def _graph_fn_apply_torch(self, F: Any, inputs: Any) -> Any:
        return inputs + F.random_normal((F.dim(inputs, 0), F.dim(inputs, 1)), 1.0, self.std)


class SpreadChoice(Component):
    """Picks 0 or 2 with equal chance per element; its ``.torch`` body always picks 1.

    Both have mean 1, so only category frequencies tell them apart: the statistical
    ``parity`` check must fail on them.
    """

    def __init__(self, scope: str = "choice") -> None:
        super().__init__(scope=scope)

    @api
    def apply(self, inputs: Any) -> Any:
        return self._graph_fn_apply(inputs)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any) -> Any:
        coin = F.random_uniform((F.dim(inputs, 0),)) < 0.5
        return F.where(coin, F.zeros_like(inputs) + 2, F.zeros_like(inputs))

    @_graph_fn_apply.torch
    def _graph_fn_apply_torch(self, F: Any, inputs: Any) -> Any:
        return F.zeros_like(inputs) + 1


class ExploringNoise(Component):
    """``inputs + N(0, std)`` where ``explore`` else ``inputs`` (correct); deterministic with explore false."""

    def __init__(self, std: float = 1.0, scope: str = "explore") -> None:
        super().__init__(scope=scope)
        self.std = float(std)

    @api
    def apply(self, inputs: Any, explore: Any) -> Any:
        return self._graph_fn_apply(inputs, explore)

    @graph_fn
    def _graph_fn_apply(self, F: Any, inputs: Any, explore: Any) -> Any:
        noise = F.random_normal((F.dim(inputs, 0), F.dim(inputs, 1)), 0.0, self.std)
        return F.where(explore, inputs + noise, inputs)


def exploring_noise_apply(inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray], config: dict) -> np.ndarray:
    """Oracle of `ExploringNoise.apply` with ``explore`` false."""
    assert not inputs["explore"], "the oracle only covers explore=false"
    return inputs["inputs"]


# ---- state: a ring buffer ------------------------------------------------------------------------------


class RingBuffer(Component):
    """Keeps the last ``capacity`` scalars inserted (correct); ``insert`` returns the slot it wrote."""

    def __init__(self, capacity: int = 3, scope: str = "ring") -> None:
        super().__init__(scope=scope)
        self.capacity = int(capacity)
        self.buffer: Any = None
        self.index: Any = None

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        self.buffer = self.get_variable("buffer", (self.capacity,), "float32", "zeros", trainable=False)
        self.index = self.get_variable("index", (), "int64", "zeros", trainable=False)

    def wrap_at(self) -> int:
        return self.capacity

    @api
    def insert(self, value: Any) -> Any:
        return self._graph_fn_insert(value)

    @api
    def read(self) -> Any:
        return self._graph_fn_read()

    @graph_fn
    def _graph_fn_insert(self, F: Any, value: Any) -> Any:
        written = self.index * 1
        slot = F.one_hot(written, self.capacity) > 0.5
        following = written + 1
        F.assign(self.buffer, F.where(slot, value + F.zeros_like(self.buffer), self.buffer))
        F.assign(self.index, F.where(following >= self.wrap_at(), F.zeros_like(following), following))
        return written

    @graph_fn
    def _graph_fn_read(self, F: Any) -> Any:
        return self.buffer * 1.0


class LossyRingBuffer(RingBuffer):
    """Wraps one slot early (off by one): the ``stateful`` check must fail after a few inserts."""

    def wrap_at(self) -> int:
        return self.capacity - 1


class RingBufferModel:
    """NumPy model of `RingBuffer`."""

    def __init__(self, config: dict, weights: dict[str, np.ndarray]) -> None:
        self.buffer = np.array(weights["buffer"], dtype=np.float32)
        self.index = int(weights["index"])
        self.capacity = int(config.get("capacity", 3))

    def insert(self, value: np.ndarray) -> np.ndarray:
        written = self.index
        self.buffer[written] = value
        self.index = (written + 1) % self.capacity
        return np.int64(written)

    def read(self) -> np.ndarray:
        return self.buffer.copy()

    def weights(self) -> dict[str, np.ndarray]:
        return {"buffer": self.buffer.copy(), "index": np.int64(self.index)}


def ring_read(inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray], config: dict) -> np.ndarray:
    """Oracle of `RingBuffer.read` on a fresh buffer."""
    return weights["buffer"]


# ---- Dense, for specs_ok ----------------------------------------------------------------------------------

_ACTIVATIONS = {None: lambda x: x, "linear": lambda x: x, "relu": lambda x: np.maximum(x, 0.0), "tanh": np.tanh}


def dense_apply(inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray], config: dict) -> np.ndarray:
    """Oracle of `reference_agents.components.common.Dense.apply` (float64)."""
    x = np.asarray(inputs["inputs"], np.float64)
    out = x @ weights["kernel"].astype(np.float64)
    if config.get("use_bias", True):
        out = out + weights["bias"]
    return _ACTIVATIONS[config.get("activation")](out)
