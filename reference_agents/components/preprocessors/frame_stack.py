"""`FrameStack`: the last k observations of each environment, concatenated along the channel axis."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.graph import api, graph_fn
from harness.spaces import BoxSpace, Space
from reference_agents.components.preprocessors.base import Preprocessor, box_like, check_size, is_batched_image


class FrameStack(Preprocessor):
    """Stacks the last ``num_frames`` frames of each batch slot: ``[B,H,W,C]`` -> ``[B,H,W,C*num_frames]``.

    Stateful: ``preprocess(inputs)`` appends ``inputs`` to each slot's history
    and returns the ``num_frames`` newest frames, oldest first and newest last
    (channels ``[(k-1)*C, k*C)`` hold the newest frame). ``reset()`` clears the
    history; the first frame after a reset (and after the build) fills all
    ``num_frames`` places, so outputs never hold frames that were not seen
    (rather than zero padding, which would be out of the observation's bounds
    after a `Normalize`, say).

    Slot ``i`` of the batch is environment ``i``: the batch size is fixed at
    construction (``batch_size``) and every call must pass exactly that many
    frames. Variables (not trainable, kept by `get_weights` and export):
    ``frames`` ``[batch_size,H,W,C*num_frames]`` in the input's dtype and
    ``fresh`` ``bool[batch_size]`` (the slots whose next frame is a first one).

    Accepts a float or integer box of images ``[B,H,W,C]`` without a time rank;
    returns the input's dtype and bounds with the channel axis ``num_frames``
    times as long.

    Args:
        num_frames: how many frames to stack, an int >= 1.
        batch_size: the number of environments (slots), an int >= 1.
        scope: the component's name.

    Raises:
        ValueError: naming the argument when one is not a positive int.
    """

    stateful = True

    def __init__(self, num_frames: int = 4, batch_size: int = 1, scope: str = "frame_stack") -> None:
        self.num_frames = check_size("FrameStack", "num_frames", num_frames)
        self.batch_size = check_size("FrameStack", "batch_size", batch_size)
        super().__init__(scope=scope)
        self.frames: Any = None
        self.fresh: Any = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts numeric images ``[B,H,W,C]`` (no time rank)."""
        space = input_spaces["inputs"]
        if not is_batched_image(space, time_rank_ok=False):
            raise self.space_mismatch("inputs", "a float or int box of images [B,H,W,C] without a time rank", space)

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """Creates ``frames`` (zeros) and ``fresh`` (all True)."""
        space = input_spaces["inputs"]
        h, w, c = space.shape
        self.frames = self.get_variable("frames", (self.batch_size, h, w, c * self.num_frames), space.dtype.name,
                                        "zeros", trainable=False)
        self.fresh = self.get_variable("fresh", (self.batch_size,), "bool", "ones", trainable=False)

    def _stacked_space(self, space: BoxSpace) -> BoxSpace:
        h, w, c = space.shape
        tile = (1, 1, self.num_frames)
        low = np.tile(np.broadcast_to(space.low, space.shape), tile)
        high = np.tile(np.broadcast_to(space.high, space.shape), tile)
        return box_like(space, (h, w, c * self.num_frames), low, high)

    @graph_fn(output_spaces=lambda self, space: self._stacked_space(space))
    def _graph_fn_preprocess(self, F: Any, inputs: Any) -> Any:
        channels = self.input_spaces["inputs"].shape[-1]
        first = F.concat([inputs] * self.num_frames, axis=-1)
        shifted = F.concat([self.frames[..., channels:], inputs], axis=-1)
        stacked = F.where(F.reshape(self.fresh, (self.batch_size, 1, 1, 1)), first, shifted)
        F.assign(self.frames, stacked)
        F.assign(self.fresh, F.zeros_like(self.fresh))
        return stacked

    @api
    def reset(self) -> None:
        """Clears every slot's history: the next frame fills all places."""
        return self._graph_fn_reset()

    @graph_fn(returns=0)
    def _graph_fn_reset(self, F: Any) -> None:
        F.assign(self.frames, F.zeros_like(self.frames))
        F.assign(self.fresh, F.ones_like(self.fresh))
