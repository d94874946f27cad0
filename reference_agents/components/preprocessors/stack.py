"""`PreprocessorStack`: preprocessors applied in order, built from components or config dicts."""

from __future__ import annotations

from typing import Any, Sequence

from harness.graph import api
from reference_agents.components.preprocessors.base import Preprocessor, check_size
from reference_agents.components.preprocessors.crop import ImageCrop
from reference_agents.components.preprocessors.frame_stack import FrameStack
from reference_agents.components.preprocessors.grayscale import GrayScale
from reference_agents.components.preprocessors.resize import ImageResize
from reference_agents.components.preprocessors.scaling import Clip, Divide, Normalize

#: Preprocessor classes by the ``type`` names a config dict uses.
PREPROCESSORS: dict[str, type[Preprocessor]] = {
    "grayscale": GrayScale,
    "resize": ImageResize,
    "crop": ImageCrop,
    "normalize": Normalize,
    "divide": Divide,
    "clip": Clip,
    "frame_stack": FrameStack,
}


def make_preprocessor(config: dict[str, Any] | Preprocessor, scope: str | None = None) -> Preprocessor:
    """A preprocessor from ``{type: NAME, **kwargs}`` (see `PREPROCESSORS`), or the component itself.

    Args:
        config: a config dict or a `Preprocessor`.
        scope: the scope for one made from a dict without its own ``scope``.

    Raises:
        ValueError: naming the entry when the type is unknown or the arguments are bad.
    """
    if isinstance(config, Preprocessor):
        return config
    if not isinstance(config, dict) or "type" not in config:
        raise ValueError(f"a preprocessor must be a Preprocessor or a dict with a 'type' key; got {config!r}")
    kwargs = dict(config)
    name = kwargs.pop("type")
    if name not in PREPROCESSORS:
        raise ValueError(f"unknown preprocessor type {name!r}; known: {sorted(PREPROCESSORS)}")
    if scope is not None:
        kwargs.setdefault("scope", scope)
    try:
        return PREPROCESSORS[name](**kwargs)
    except TypeError as exc:
        raise ValueError(f"preprocessor {config!r}: {exc}") from None


class PreprocessorStack(Preprocessor):
    """Applies preprocessors in order: ``preprocess(x) = p_n(...p_2(p_1(x)))``.

    Members come as components or as config dicts
    ``{type: NAME, **constructor kwargs}`` with ``NAME`` one of `PREPROCESSORS`
    (``grayscale``, ``resize``, ``crop``, ``normalize``, ``divide``, ``clip``,
    ``frame_stack``). A member made from a dict without ``scope`` gets the scope
    ``"{index}_{type}"`` (``"0_grayscale"``), so one type may appear twice.
    ``reset()`` resets every stateful member (`FrameStack`); the stack is
    stateful when any member is. The input and output spaces are those of the
    first member's input and the last member's output.

    Args:
        preprocessors: the members in application order, at least one.
        scope: the component's name.

    Raises:
        ValueError: when the list is empty or an entry is not a preprocessor
            or a valid config dict.
    """

    def __init__(self, preprocessors: Sequence[dict[str, Any] | Preprocessor],
                 scope: str = "preprocessor_stack") -> None:
        if isinstance(preprocessors, (str, bytes, dict)) or not isinstance(preprocessors, Sequence) \
                or not preprocessors:
            raise ValueError(f"PreprocessorStack: preprocessors must be a non-empty list of Preprocessors or "
                             f"config dicts; got {preprocessors!r}")
        members = []
        for i, entry in enumerate(preprocessors):
            try:
                scope_i = f"{i}_{entry['type']}" if isinstance(entry, dict) and "type" in entry else None
                members.append(make_preprocessor(entry, scope_i))
            except ValueError as exc:
                raise ValueError(f"PreprocessorStack: preprocessors[{i}]: {exc}") from None
        super().__init__(scope=scope)
        self.add_components(*members)
        self.members: list[Preprocessor] = members
        self.stateful = any(m.stateful for m in members)

    @api
    def preprocess(self, inputs: Any) -> Any:
        """The output of the last member after each member preprocessed the previous one's output."""
        for member in self.members:
            inputs = member.preprocess(inputs)
        return inputs

    @api
    def reset(self) -> None:
        """Resets every stateful member (nothing to do when none is)."""
        for member in self.members:
            if member.stateful:
                member.reset()


def atari_preprocessing(batch_size: int, num_frames: int = 4, size: int = 84) -> list[dict[str, Any]]:
    """The usual Atari pipeline as a `PreprocessorStack` config.

    ``uint8[B,210,160,3]`` frames become ``float32[B,size,size,num_frames]`` in
    ``[0, 1]``: luma gray scale, bilinear resize, division by 255 and a stack of
    the last ``num_frames`` frames per environment.

    Args:
        batch_size: the number of environments (FrameStack slots).
        num_frames: how many frames to stack.
        size: the output's height and width.

    Raises:
        ValueError: naming the argument when one is not a positive int.
    """
    batch_size = check_size("atari_preprocessing", "batch_size", batch_size)
    num_frames = check_size("atari_preprocessing", "num_frames", num_frames)
    size = check_size("atari_preprocessing", "size", size)
    return [
        {"type": "grayscale"},
        {"type": "resize", "width": size, "height": size},
        {"type": "divide", "divisor": 255},
        {"type": "frame_stack", "num_frames": num_frames, "batch_size": batch_size},
    ]
