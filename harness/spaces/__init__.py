"""Spaces: typed descriptions of the values flowing through component graphs (pure NumPy)."""

from harness.spaces.base import ROOT, SEP, Space
from harness.spaces.boxes import BoolBox, BoxSpace, FloatBox, IntBox
from harness.spaces.containers import ContainerSpace, Dict, Tuple
from harness.spaces.gym import from_gymnasium, to_gymnasium
from harness.spaces.text import format_space, parse

__all__ = [
    "ROOT", "SEP", "Space", "BoxSpace", "FloatBox", "IntBox", "BoolBox", "ContainerSpace",
    "Dict", "Tuple", "from_gymnasium", "to_gymnasium", "parse", "format_space",
]
