"""`GrayScale`: a weighted sum of an image's colour channels."""

from __future__ import annotations

from typing import Any, Sequence

from harness.graph import graph_fn
from harness.spaces import Space
from reference_agents.components.preprocessors.base import Preprocessor, check_number, is_batched_image

#: ITU-R BT.601 luma weights for R, G, B.
LUMA_WEIGHTS = (0.299, 0.587, 0.114)


class GrayScale(Preprocessor):
    """Turns colour images into gray ones: ``sum_c weights[c] * inputs[..., c]``.

    Accepts a float or integer box of images ``[B,H,W,C]`` (a time rank in
    either layout may come too) with ``C == len(weights)``, e.g. Atari frames
    ``uint8[B,210,160,3]``. Returns **float32** whatever the input dtype (gray
    values of uint8 frames are not integers), of shape ``[B,H,W,1]`` with
    ``keep_rank`` or ``[B,H,W]`` without. The channels are summed in order,
    ``w0*x0 + w1*x1 + ...``, in float32 on both backends.

    Args:
        weights: one non-negative weight per channel (default: BT.601 luma for RGB).
        keep_rank: keep a channel axis of size 1 (True) or drop it (False).
        scope: the component's name.

    Raises:
        ValueError: naming the argument when ``weights`` is empty, holds a
            negative or non-finite number, or ``keep_rank`` is not a bool.
    """

    def __init__(self, weights: Sequence[float] = LUMA_WEIGHTS, keep_rank: bool = True,
                 scope: str = "grayscale") -> None:
        if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence) or not weights:
            raise ValueError(f"GrayScale: weights must be a non-empty sequence of numbers; got {weights!r}")
        for w in weights:
            if check_number("GrayScale", "weights", w) < 0:
                raise ValueError(f"GrayScale: weights must be non-negative; got {weights!r}")
        if not isinstance(keep_rank, bool):
            raise ValueError(f"GrayScale: keep_rank must be a bool; got {keep_rank!r}")
        super().__init__(scope=scope)
        self.weights = tuple(float(w) for w in weights)
        self.keep_rank = keep_rank

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts numeric images ``[B,H,W,C]`` (time rank allowed) with ``C == len(weights)``."""
        space = input_spaces["inputs"]
        if not (is_batched_image(space) and space.shape[-1] == len(self.weights)):
            raise self.space_mismatch("inputs", f"a float or int box of images [B,H,W,{len(self.weights)}]", space)

    @graph_fn
    def _graph_fn_preprocess(self, F: Any, inputs: Any) -> Any:
        x = F.cast(inputs, "float32")
        gray = x[..., 0:1] * self.weights[0]
        for c in range(1, len(self.weights)):
            gray = gray + x[..., c:c + 1] * self.weights[c]
        return gray if self.keep_rank else F.squeeze(gray, -1)
