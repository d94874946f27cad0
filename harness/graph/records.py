"""Abstract records and call nodes produced by the assembly phase."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import optree

from harness.graph.errors import AssemblyError

if TYPE_CHECKING:
    from harness.graph.component import Component
    from harness.graph.decorators import GraphFnSpec
    from harness.spaces import Space

_ids = itertools.count()


class Record:
    """An abstract value flowing along one edge during assembly: no shape, no type.

    The build fills in ``space``. Records refuse arithmetic, truth tests and
    iteration, so code that computes outside a graph function fails at assembly
    with a message that says so.
    """

    __slots__ = ("id", "label", "space")

    def __init__(self, label: str) -> None:
        self.id = next(_ids)
        self.label = label
        self.space: Space | None = None

    def __repr__(self) -> str:
        return f"<record {self.label}{' ' + repr(self.space) if self.space is not None else ''}>"

    def _refuse(self, what: str) -> Any:
        raise AssemblyError(
            f"{what} on the abstract record {self.label!r} during assembly: API methods only route "
            f"values between sub-components' API methods and their own graph functions; compute "
            f"inside a @graph_fn"
        )

    def __bool__(self) -> bool:
        return self._refuse("a truth test (if/and/or)")

    def __iter__(self):
        return self._refuse("unpacking/iteration (does the graph function declare returns=N?)")

    def __len__(self) -> int:
        return self._refuse("len()")

    def __getitem__(self, item: Any) -> Any:
        return self._refuse(f"indexing [{item!r}]")


def _make_refusal(op: str):
    def refuse(self: Record, *args: Any) -> Any:
        return self._refuse(f"the operator {op}")
    return refuse


for _name, _op in [("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"), ("floordiv", "//"),
                   ("mod", "%"), ("pow", "**"), ("matmul", "@"), ("neg", "unary -"), ("lt", "<"),
                   ("le", "<="), ("gt", ">"), ("ge", ">="), ("and", "&"), ("or", "|"), ("invert", "~")]:
    setattr(Record, f"__{_name}__", _make_refusal(_op))
    if _name not in ("neg", "lt", "le", "gt", "ge", "invert"):
        setattr(Record, f"__r{_name}__", _make_refusal(_op))


@dataclass(eq=False)
class ApiCall:
    """One call of an API method during assembly."""

    component: Component
    method: str
    args: dict[str, Any]          # argument name -> record (or nested structure of records)
    outputs: Any = None            # nested structure of records
    caller: Component | None = None


@dataclass(eq=False)
class GraphFnCall:
    """One call of a graph function during assembly: a step of the flat call chain."""

    component: Component
    spec: GraphFnSpec
    args: tuple                    # records, nested structures of records, or constants
    outputs: list[Record]               # one record per returned value (len = the return count)
    api_stack: tuple[tuple[Component, str], ...] = field(default_factory=tuple)

    @property
    def where(self) -> str:
        """A readable location: ``scope.api_method -> graph_fn``."""
        apis = " -> ".join(f"{c.global_scope}.{m}" for c, m in self.api_stack)
        return f"{apis} -> {self.component.global_scope}.{self.spec.name}"


def records_in(structure: Any) -> list[Record]:
    """The records among the leaves of a nested structure (dicts, tuples, lists; other leaves are skipped)."""
    return [x for x in optree.tree_leaves(structure) if isinstance(x, Record)]
