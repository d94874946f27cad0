"""What a failed assembly or build had done when it failed: `PartialBuild`, carried by the error.

When an exception escapes the assembly (`Assembler.assemble`) or the build (`Builder.run`,
`Builder.assign_root_spaces`, `GraphExecutor.build`), the exception object itself gets the
attribute ``partial_build``: a `PartialBuild` naming the root, the traces recorded so far, the
input spaces components had received, and the failing component (or, for a build stuck for lack
of spaces, the components still lacking them). The exception is re-raised unchanged: its type,
message, cause and traceback are what they were. This holds for spacegraph's own errors and for
any other exception the user's component code raised (a ``KeyError`` in an API method body
during assembly stays a ``KeyError``, now with ``partial_build``); during the build such errors
already arrive wrapped in a `BuildError` (``raise ... from`` the original), which carries it.

The innermost attachment wins: a phase that sees an exception that already carries a
``partial_build`` (say, from a nested build in a component's code) leaves it alone. Drawings
read it with `GraphModel.from_exception` (`harness.graph.visualize`), which also looks through
the exception's ``__cause__`` / ``__context__`` chain (an agent config's `ConfigError` wrapping
the `BuildError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from harness.graph.assembly import Assembly
    from harness.graph.component import Component
    from harness.spaces import Space

#: The attribute a failed assembly or build sets on the exception that escapes it.
ATTRIBUTE = "partial_build"

PHASES = ("assembly", "build")


@dataclass(eq=False)
class PartialBuild:
    """A failed assembly or build as far as it got.

    Attributes:
        root: the root component (after a strategy's expansion).
        assembly: the traces recorded so far; for an assembly error the root API method being
            traced holds the calls and steps made before the error. Record spaces are whatever
            the build had set (None where it had not got there).
        phase: ``"assembly"`` or ``"build"``.
        spaces: the input spaces components had received, keyed by scope path (built components
            and the failing one, if it got its spaces before failing).
        failed: the component the error happened in: the one whose API method or graph function
            was being traced (assembly), or whose input spaces, ``check_input_spaces``,
            ``create_variables`` or graph-function sample run failed (build); the root for an
            error after the components were built (compiling an API method); None for a build
            stuck for lack of spaces.
        stuck: the components a stuck build could not make input-complete (else empty).
        task: what ``failed`` was doing, in words (``"API method sloppy.apply"``, ``"graph
            function ... -> root/body/second._graph_fn_apply"``, ``"create_variables"``), or None.
    """

    root: Component
    assembly: Assembly
    phase: str
    spaces: dict[str, dict[str, Space]] = field(default_factory=dict)
    failed: Component | None = None
    stuck: list[Component] = field(default_factory=list)
    task: str | None = None

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"PartialBuild: phase must be one of {PHASES}; got {self.phase!r}")


def spaces_so_far(root: Component) -> dict[str, dict[str, Space]]:
    """The input spaces the components under ``root`` have received, keyed by scope path."""
    return {c.global_scope: dict(c.input_spaces) for c in root.walk() if c.input_spaces is not None}


def attach(exc: BaseException, partial: PartialBuild) -> None:
    """Sets ``exc.partial_build`` unless it carries one already (the innermost phase wins).

    An exception object that takes no attributes is left as it is (nothing is drawn for it).
    """
    if isinstance(getattr(exc, ATTRIBUTE, None), PartialBuild):
        return
    try:
        setattr(exc, ATTRIBUTE, partial)
    except (AttributeError, TypeError):
        pass


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during (``__cause__``, ``__context__``), each once."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        err = todo.pop(0)
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        yield err
        todo.extend([err.__cause__, err.__context__])


def partial_build_of(exc: BaseException) -> PartialBuild | None:
    """The `PartialBuild` of ``exc`` or of the first exception in its cause/context chain that has one."""
    for err in exception_chain(exc):
        partial = getattr(err, ATTRIBUTE, None)
        if isinstance(partial, PartialBuild):
            return partial
    return None
