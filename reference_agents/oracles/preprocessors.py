"""NumPy oracles and stateful models for the preprocessors, written from their definitions.

Signatures follow `reference_agents.oracles.common`: ``fn(inputs, weights,
config) -> outputs`` and ``Model(config, weights)``. Image maths runs in
float64 and is cast to the component's output dtype at the end.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

_LUMA = (0.299, 0.587, 0.114)


def gray(x: np.ndarray, weights: Any = _LUMA, keep_rank: bool = True) -> np.ndarray:
    """``sum_c weights[c] * x[..., c]`` in float64, cast to float32; channel axis kept with ``keep_rank``."""
    w = np.asarray(weights, np.float64)
    out = np.tensordot(np.asarray(x, np.float64), w, axes=([-1], [0]))
    return (out[..., None] if keep_rank else out).astype(np.float32)


def _half_pixel_source(size_in: int, size_out: int) -> np.ndarray:
    # output pixel i spans [i, i+1) * size_in/size_out; its centre, in input pixel-centre coordinates
    return (np.arange(size_out) + 0.5) * size_in / size_out - 0.5


def _linear_along(x: np.ndarray, axis: int, size_out: int) -> np.ndarray:
    """Linear interpolation of ``x`` along ``axis`` at half-pixel centres, clamped at the edges."""
    size_in = x.shape[axis]
    src = np.clip(_half_pixel_source(size_in, size_out), 0.0, size_in - 1)
    left = np.floor(src).astype(int)
    right = np.minimum(left + 1, size_in - 1)
    t = src - left
    shape = [1] * x.ndim
    shape[axis] = size_out
    t = t.reshape(shape)
    return np.take(x, left, axis=axis) * (1.0 - t) + np.take(x, right, axis=axis) * t


def resize(x: np.ndarray, width: int, height: int, method: str = "bilinear") -> np.ndarray:
    """Resizes ``x [B,H,W,C]`` to ``[B,height,width,C]`` (see `ImageResize` for the two methods)."""
    x = np.asarray(x)
    if method == "nearest":
        h_in, w_in = x.shape[1], x.shape[2]
        rows = np.minimum(np.floor((np.arange(height) + 0.5) * h_in / height).astype(int), h_in - 1)
        cols = np.minimum(np.floor((np.arange(width) + 0.5) * w_in / width).astype(int), w_in - 1)
        return x[:, rows][:, :, cols]
    out = _linear_along(_linear_along(x.astype(np.float64), 1, height), 2, width)
    return out.astype(np.float32)


def crop(x: np.ndarray, config: dict[str, Any]) -> np.ndarray:
    """``x[..., y:y+height, x:x+width, :]``."""
    top, left = config["y"], config["x"]
    return np.asarray(x)[..., top:top + config["height"], left:left + config["width"], :]


def normalize(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """``(x - low) / (high - low)`` as float32."""
    return ((np.asarray(x, np.float64) - low) / (high - low)).astype(np.float32)


def divide(x: np.ndarray, divisor: float) -> np.ndarray:
    """``x / divisor`` as float32."""
    return (np.asarray(x, np.float64) / divisor).astype(np.float32)


def clip(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """``x`` clipped to ``[low, high]`` in its own dtype."""
    x = np.asarray(x)
    return np.clip(x.astype(np.float64), low, high).astype(x.dtype)


# ---- oracles of the stateless components ------------------------------------------------------------


def grayscale(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `GrayScale.preprocess`."""
    return gray(inputs["inputs"], config.get("weights", _LUMA), config.get("keep_rank", True))


def image_resize(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `ImageResize.preprocess`."""
    return resize(inputs["inputs"], config.get("width", 84), config.get("height", 84),
                  config.get("method", "bilinear"))


def image_crop(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `ImageCrop.preprocess`."""
    return crop(inputs["inputs"], config)


def normalize_oracle(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `Normalize.preprocess`."""
    return normalize(inputs["inputs"], config["low"], config["high"])


def divide_oracle(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `Divide.preprocess`."""
    return divide(inputs["inputs"], config["divisor"])


def clip_oracle(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `Clip.preprocess`."""
    return clip(inputs["inputs"], config["min"], config["max"])


#: One stateless NumPy step per config ``type`` of a `PreprocessorStack` member.
STEPS: dict[str, Callable[[np.ndarray, dict[str, Any]], np.ndarray]] = {
    "grayscale": lambda x, c: gray(x, c.get("weights", _LUMA), c.get("keep_rank", True)),
    "resize": lambda x, c: resize(x, c.get("width", 84), c.get("height", 84), c.get("method", "bilinear")),
    "crop": crop,
    "normalize": lambda x, c: normalize(x, c["low"], c["high"]),
    "divide": lambda x, c: divide(x, c["divisor"]),
    "clip": lambda x, c: clip(x, c["min"], c["max"]),
}


def preprocessor_stack(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of a stateless `PreprocessorStack.preprocess`: the members' steps in order."""
    x = inputs["inputs"]
    for member in config["preprocessors"]:
        x = STEPS[member["type"]](x, member)
    return x


# ---- stateful models -----------------------------------------------------------------------------------


class FrameStackModel:
    """NumPy model of `FrameStack`: a list of the last ``num_frames`` frames per slot.

    Args:
        config: the spec's `FrameStack` config (``num_frames``, ``batch_size``).
        weights: the initial variables (unused: a fresh stack is empty).
        prefix: the stack's path inside the component under test, with a trailing ``/``.
    """

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray], prefix: str = "") -> None:
        self.k = int(config.get("num_frames", 4))
        self.batch_size = int(config.get("batch_size", 1))
        self.prefix = prefix
        self.history: list[list[np.ndarray]] = [[] for _ in range(self.batch_size)]
        self._shape_dtype: tuple[tuple[int, ...], np.dtype] | None = None

    def preprocess(self, inputs: np.ndarray) -> np.ndarray:
        """Appends each slot's frame; returns its last ``k`` frames along the channel axis, newest last."""
        inputs = np.asarray(inputs)
        self._shape_dtype = (inputs.shape[1:], inputs.dtype)
        out = []
        for slot, frame in enumerate(inputs):
            hist = self.history[slot]
            if not hist:
                hist.extend([frame] * (self.k - 1))   # a first frame fills every place
            hist.append(frame)
            del hist[:-self.k]
            out.append(np.concatenate(hist, axis=-1))
        return np.stack(out)

    def reset(self) -> None:
        """Forgets every slot's frames."""
        self.history = [[] for _ in range(self.batch_size)]

    def weights(self) -> dict[str, np.ndarray]:
        """``frames`` (zeros for an empty slot) and ``fresh``, once a frame has been seen (their shape is known)."""
        fresh = np.array([not h for h in self.history])
        if self._shape_dtype is None:
            return {f"{self.prefix}fresh": fresh}
        (h, w, c), dtype = self._shape_dtype
        frames = np.stack([np.concatenate(hist, axis=-1) if hist else np.zeros((h, w, c * self.k), dtype)
                           for hist in self.history]).astype(dtype)
        return {f"{self.prefix}frames": frames, f"{self.prefix}fresh": fresh}


class PreprocessorStackModel:
    """NumPy model of a `PreprocessorStack` built from config dicts (stateful members: ``frame_stack``).

    Args:
        config: the spec's config (``preprocessors``: a list of ``{type: ..., ...}``).
        weights: the initial variables (unused).
    """

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray]) -> None:
        self.steps: list[Callable[[np.ndarray], np.ndarray]] = []
        self.stacks: list[FrameStackModel] = []
        for i, member in enumerate(config["preprocessors"]):
            kind = member["type"]
            if kind == "frame_stack":
                model = FrameStackModel(member, weights, prefix=f"{i}_{kind}/")
                self.stacks.append(model)
                self.steps.append(model.preprocess)
            else:
                self.steps.append(lambda x, fn=STEPS[kind], c=member: fn(x, c))

    def preprocess(self, inputs: np.ndarray) -> np.ndarray:
        """The members' steps in order."""
        x = inputs
        for step in self.steps:
            x = step(x)
        return x

    def reset(self) -> None:
        """Resets every frame stack."""
        for model in self.stacks:
            model.reset()

    def weights(self) -> dict[str, np.ndarray]:
        """The frame stacks' variables."""
        out: dict[str, np.ndarray] = {}
        for model in self.stacks:
            out.update(model.weights())
        return out
