"""What ring-buffer components share: checking the records' space and creating one buffer per leaf."""

from __future__ import annotations

from typing import Any

from harness.graph import BuildError, Component
from harness.spaces import Space


def check_records_space(component: Component, input_spaces: dict[str, Space]) -> None:
    """Requires every leaf of ``records`` (if given) to have a batch rank and no time rank."""
    records = input_spaces.get("records")
    if records is None:
        return
    bad = [p or "<root>" for p, s in records.leaves() if not s.has_batch_rank or s.has_time_rank]
    if bad:
        raise component.space_mismatch("records", "records whose every leaf has a batch rank and no time rank",
                                       records, f"leaves {bad} do not")


def create_record_buffers(component: Component, input_spaces: dict[str, Space], capacity: int,
                          writer: str) -> tuple[Space, dict[str, Any]]:
    """One zero buffer ``records/<key path>`` of shape ``(capacity, *leaf)`` per record leaf.

    Args:
        component: the component creating them (inside its `create_variables`).
        input_spaces: its input spaces, which must hold ``records``.
        capacity: rows per buffer.
        writer: the API method whose ``records`` shape the buffers (for the error).

    Returns:
        The records' space and the buffers keyed by key path.

    Raises:
        BuildError: when no built API method gave ``records`` a space.
    """
    if "records" not in input_spaces:
        raise BuildError(f"{type(component).__name__} {component.global_scope!r}: its buffers take their shapes "
                         f"from the records of {writer}, which no built API method calls; build {writer} too")
    space = input_spaces["records"]
    buffers = {}
    for path, leaf in space.leaves():
        name = f"records/{path}" if path else "records"
        buffers[path] = component.get_variable(name, (capacity,) + leaf.shape, leaf.dtype.name, "zeros",
                                               trainable=False)
    return space, buffers
