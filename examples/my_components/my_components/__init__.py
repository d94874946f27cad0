"""A user's own spacegraph components, kept outside the spacegraph repository (see README.md here)."""

from my_components.soft_clip import SoftClip

__all__ = ["SoftClip"]
