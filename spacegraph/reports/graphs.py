"""Reference graphs for build-overhead benchmarks: one component, and ~40 components."""

from __future__ import annotations

from harness.graph import Component, api


class Block(Component):
    """Two Dense layers in a sub-scope (three components)."""

    def __init__(self, units: int, scope: str) -> None:
        from reference_agents.components.common import Dense

        super().__init__(Dense(units, activation="relu", scope="a"), Dense(units, activation="tanh", scope="b"),
                         scope=scope)

    @api
    def apply(self, inputs):
        """Both layers in turn."""
        return self.sub_components["b"].apply(self.sub_components["a"].apply(inputs))


class DenseStack(Component):
    """A root over ``blocks`` `Block`s: ``1 + 3 * blocks`` components (13 blocks -> 40).

    Args:
        blocks: how many blocks to chain.
        units: width of every layer.
    """

    def __init__(self, blocks: int = 13, units: int = 16, scope: str = "stack") -> None:
        if blocks < 1:
            raise ValueError(f"DenseStack: blocks must be >= 1; got {blocks}")
        super().__init__(*[Block(units, scope=f"block{i}") for i in range(blocks)], scope=scope)
        self.blocks = blocks

    @api
    def apply(self, inputs):
        """All blocks in turn."""
        for i in range(self.blocks):
            inputs = self.sub_components[f"block{i}"].apply(inputs)
        return inputs


def single_component(units: int = 16) -> Component:
    """One Dense layer as the root."""
    from reference_agents.components.common import Dense

    return Dense(units, scope="dense")
