"""Errors the component graph raises; each names the component, method and argument involved."""

from __future__ import annotations


class SpacegraphError(Exception):
    """Base class of all errors raised by spacegraph's graph machinery."""


class AssemblyError(SpacegraphError):
    """A component graph could not be assembled (wrong calls between components)."""


class BuildError(SpacegraphError):
    """A component graph could not be built (missing spaces, a failing graph function, ...)."""


class SpaceMismatchError(BuildError):
    """A component received an input space it does not accept."""

    def __init__(self, component: str, method: str | None, argument: str, expected: str, received: str,
                 detail: str = "") -> None:
        self.component, self.method, self.argument = component, method, argument
        self.expected, self.received, self.detail = expected, received, detail
        where = f"{component}.{method}({argument})" if method else f"{component} argument '{argument}'"
        msg = f"space mismatch at {where}: expected {expected}, received {received}"
        super().__init__(msg + (f" ({detail})" if detail else ""))


class UnknownApiError(SpacegraphError, KeyError):
    """An API method that is not registered was called."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ExecutionError(SpacegraphError):
    """A built graph was called with inputs that do not fit its spaces."""


class InputValidationError(ExecutionError):
    """Validate mode (`GraphExecutor(validate=True)`): an input value lies outside its declared space.

    The message names the root component, API method, argument (with the key path inside a container),
    the offending value and index (or dtype/shape) and the space; it is the same on every backend.
    """

    def __init__(self, message: str, method: str = "", argument: str = "", path: str = "",
                 space: object = None) -> None:
        super().__init__(message)
        self.method, self.argument, self.path, self.space = method, argument, path, space
