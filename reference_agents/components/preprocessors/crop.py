"""`ImageCrop`: a fixed rectangle cut out of every image."""

from __future__ import annotations

from typing import Any

from harness.graph import graph_fn
from harness.spaces import Space
from reference_agents.components.preprocessors.base import Preprocessor, check_size, is_batched_image


class ImageCrop(Preprocessor):
    """Cuts ``inputs[..., y:y+height, x:x+width, :]`` out of images ``[B,H,W,C]``.

    Accepts a float or integer box of images (a time rank in either layout may
    come too) that holds the rectangle: ``y + height <= H`` and ``x + width <= W``.
    Returns the input's dtype, core shape ``[height,width,C]``.

    Args:
        x: the left column, an int >= 0.
        y: the top row, an int >= 0.
        width: the crop's width, an int >= 1.
        height: the crop's height, an int >= 1.
        scope: the component's name.

    Raises:
        ValueError: naming the argument when one is not an int in range.
    """

    def __init__(self, x: int, y: int, width: int, height: int, scope: str = "crop") -> None:
        self.x = check_size("ImageCrop", "x", x, minimum=0)
        self.y = check_size("ImageCrop", "y", y, minimum=0)
        self.width = check_size("ImageCrop", "width", width)
        self.height = check_size("ImageCrop", "height", height)
        super().__init__(scope=scope)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts numeric images ``[B,H,W,C]`` large enough to hold the rectangle."""
        space = input_spaces["inputs"]
        if not is_batched_image(space):
            raise self.space_mismatch("inputs", "a float or int box of images [B,H,W,C]", space)
        h, w, _ = space.shape
        if self.y + self.height > h or self.x + self.width > w:
            raise self.space_mismatch(
                "inputs", f"images of at least {self.y + self.height} rows and {self.x + self.width} columns",
                space, f"the crop rows {self.y}..{self.y + self.height - 1}, columns "
                       f"{self.x}..{self.x + self.width - 1} do not fit images of {h} x {w}")

    @graph_fn
    def _graph_fn_preprocess(self, F: Any, inputs: Any) -> Any:
        return inputs[..., self.y:self.y + self.height, self.x:self.x + self.width, :]
