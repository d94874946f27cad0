"""ResidualBlock's argument errors name ResidualBlock, the class the user configured, not the Conv2D inside it.

Written after the seed-4417 mutation sample (reports/mutation/components.md) drew the surviving mutant that drops
ResidualBlock's own `kernel_initializer` check (its inner Conv2D then refuses the value, naming Conv2D): a figure
counting this check is biased.
"""

from __future__ import annotations

import pytest

from reference_agents.components.nn.residual import ResidualBlock

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.nn.residual",)


@pytest.mark.parametrize("argument, value", [("filters", 0), ("kernel_size", (3, 0)), ("activation", "linear"),
                                             ("kernel_initializer", "bogus"), ("bias_initializer", "bogus")])
def test_each_bad_argument_is_refused_naming_the_block_and_the_argument(argument: str, value: object) -> None:
    kwargs = {"filters": 4, argument: value}
    with pytest.raises(ValueError, match=rf"^ResidualBlock: {argument} must be"):
        ResidualBlock(**kwargs)
