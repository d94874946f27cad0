"""Root components that only exist so that a spec can exercise a component that cannot be a root alone.

Each fixture is named by a spec under ``specs/components/``. A fixture's
``spec_covers`` class attribute lists the library classes a spec of the
fixture stands in for (``spacegraph spec coverage`` counts them as covered).
"""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, forward
from reference_agents.components.common import (
    Dense, FoldTimeRank, Synchronizer, UnfoldTimeRank,
)


class SyncedPair(Component):
    """A `Dense` layer, its copy and a `Synchronizer` from the first into the copy.

    API: ``source(inputs)`` and ``target(inputs)`` apply either layer;
    ``sync()`` copies (or blends, ``tau < 1``) the source's variables into the
    target's. Variables: ``source/kernel``, ``source/bias``, ``target/kernel``,
    ``target/bias``; the two layers start from different values (initial values
    are seeded by variable path).

    Args:
        units: the layers' output size.
        activation: the layers' activation.
        tau: the synchronizer's blend factor.
        scope: the component's name.
    """

    spec_covers = (Synchronizer,)

    def __init__(self, units: int, activation: str | None = None, tau: float = 1.0,
                 scope: str = "synced_pair") -> None:
        source = Dense(units, activation, bias_initializer="normal(0.5)", scope="source")
        target = source.copy(scope="target")
        synchronizer = Synchronizer(source, target, tau=tau, scope="synchronizer")
        super().__init__(source, target, synchronizer, scope=scope)
        self.source_layer, self.target_layer, self.synchronizer = source, target, synchronizer

    source = forward("source_layer", Dense.apply, doc="The source layer's output.")
    target = forward("target_layer", Dense.apply, doc="The target layer's output.")
    sync = forward("synchronizer", Synchronizer.sync, doc="Runs the synchronizer.")


class TimeDistributedDense(Component):
    """A `Dense` layer applied at every time step: fold the time rank, apply, unfold like the input.

    API: ``apply(inputs)`` for ``float*[B,T,n]`` or ``float*[T,B,n]``. Variables:
    ``dense/kernel`` and ``dense/bias``.

    Args:
        units: the layer's output size.
        activation: the layer's activation.
        scope: the component's name.
    """

    def __init__(self, units: int, activation: str | None = None, scope: str = "time_distributed") -> None:
        fold, unfold = FoldTimeRank(scope="fold"), UnfoldTimeRank(scope="unfold")
        dense = Dense(units, activation, scope="dense")
        super().__init__(fold, dense, unfold, scope=scope)
        self.fold, self.dense, self.unfold = fold, dense, unfold

    @api
    def apply(self, inputs: Any) -> Any:
        """``dense(inputs)`` step by step, in the input's layout."""
        return self.unfold.unfold(self.dense.apply(self.fold.fold(inputs)), inputs)


class TimeRankRoundTrip(Component):
    """Folds the time rank of a (nested) value and unfolds it again like the original.

    API: ``roundtrip(inputs)`` returns ``inputs`` unchanged (same spaces, bounds
    kept), through `FoldTimeRank` and `UnfoldTimeRank`.

    Args:
        scope: the component's name.
    """

    def __init__(self, scope: str = "roundtrip") -> None:
        fold, unfold = FoldTimeRank(scope="fold"), UnfoldTimeRank(scope="unfold")
        super().__init__(fold, unfold, scope=scope)
        self.fold, self.unfold = fold, unfold

    @api
    def roundtrip(self, inputs: Any) -> Any:
        """``inputs``, folded and unfolded."""
        return self.unfold.unfold(self.fold.fold(inputs), inputs)
