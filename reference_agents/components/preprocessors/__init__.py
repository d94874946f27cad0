"""Observation preprocessors: gray scale, resize, crop, value scaling, frame stacking and stacks of them."""

from reference_agents.components.preprocessors.base import Preprocessor
from reference_agents.components.preprocessors.crop import ImageCrop
from reference_agents.components.preprocessors.frame_stack import FrameStack
from reference_agents.components.preprocessors.grayscale import GrayScale
from reference_agents.components.preprocessors.resize import ImageResize
from reference_agents.components.preprocessors.scaling import Clip, Divide, Normalize
from reference_agents.components.preprocessors.stack import (
    PREPROCESSORS, PreprocessorStack, atari_preprocessing, make_preprocessor,
)

__all__ = ["Preprocessor", "GrayScale", "ImageResize", "ImageCrop", "Normalize", "Divide", "Clip", "FrameStack",
           "PreprocessorStack", "PREPROCESSORS", "make_preprocessor", "atari_preprocessing"]
