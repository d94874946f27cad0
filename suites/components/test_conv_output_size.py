"""`conv_output_size`, the public helper behind Conv2D's and MaxPool2D's output shapes, returns what it documents:
``(out, pad_before, pad_after)``, no padding under 'valid', TensorFlow's SAME split under 'same'.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that returns
a padding of 1 after 'valid' windows (no caller in the repository reads the pads of 'valid'): a figure counting this
check is biased.
"""

from __future__ import annotations

import pytest

from reference_agents.components.nn.conv2d import conv_output_size

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.nn.conv2d",)


@pytest.mark.parametrize("size, kernel, stride, padding, expected", [
    (7, 3, 2, "valid", (3, 0, 0)), (4, 4, 1, "valid", (1, 0, 0)), (2, 3, 1, "valid", (0, 0, 0)),
    (7, 3, 2, "same", (4, 1, 1)), (6, 3, 2, "same", (3, 0, 1)), (5, 1, 1, "same", (5, 0, 0))])
def test_output_size_and_padding(size: int, kernel: int, stride: int, padding: str, expected: tuple) -> None:
    assert conv_output_size(size, kernel, stride, padding) == expected
