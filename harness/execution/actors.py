"""Remote actors behind one small interface: `ActorExecutor`, `ActorHandle`, `Future`, and an in-process one.

Coordination code (Ape-X's driver, IMPALA's learner loop) is written against these classes and never
imports a distributed engine: `InProcessActorExecutor` runs the same code in one process (tests,
debugging, ``spacegraph train --executor local``), `harness.execution.ray.RayActorExecutor` runs each
actor as a Ray actor process. An actor is any object made by a factory (a class or a function that
pickles by reference); its methods are called by name and answer with a `Future`::

    executor = InProcessActorExecutor()
    shard = executor.start("shard-0", ReplayShard, capacity=1000, restarts=3)
    size = shard.call("add", records).result(timeout=10)
    weights = executor.put(agent.get_weights())          # one shared copy, sent to every actor
    for worker in workers:
        worker.call("set_weights", weights)

A call whose actor dies raises `ActorFailure` (``died=True``) from `Future.result`; a call whose method
raises gives `ActorFailure` with ``died=False`` and the error's text. `ActorExecutor.restart` makes a
fresh actor under the same handle from the same factory and arguments (its state starts anew: the
coordinator re-sends what it needs, e.g. weights).
"""

from __future__ import annotations

import abc
import threading
import time
import traceback
from typing import Any, Callable, Sequence


class ActorFailure(RuntimeError):
    """A call to an actor failed: the actor died (``died``) or its method raised.

    Attributes:
        actor: the actor's name.
        method: the method called.
        died: True when the actor's process (or in-process object) is gone and must be restarted.
        detail: the error's text (the remote traceback where there is one).
    """

    def __init__(self, actor: str, method: str, died: bool, detail: str) -> None:
        self.actor, self.method, self.died, self.detail = actor, method, died, detail
        what = "died" if died else "raised"
        super().__init__(f"actor {actor!r} {what} in {method}(): {detail}")


class Future(abc.ABC):
    """The answer of one actor call, to wait for."""

    @abc.abstractmethod
    def result(self, timeout: float | None = None) -> Any:
        """The call's return value.

        Raises:
            ActorFailure: if the actor died or the method raised.
            TimeoutError: if no answer came within ``timeout`` seconds.
        """

    @abc.abstractmethod
    def done(self) -> bool:
        """True once `result` returns (or raises) without waiting."""

    @abc.abstractmethod
    def as_argument(self) -> Any:
        """The answer as an argument of another call, without fetching it here: it travels from the actor
        that made it to the one that takes it (on Ray, by reference through the object store)."""


class ActorHandle(abc.ABC):
    """One actor: call its methods by name.

    Attributes:
        name: the name it was started with (errors and reports name it).
        incarnation: 0 for the first actor, +1 at each restart.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.incarnation = 0

    @abc.abstractmethod
    def call(self, method: str, *args: Any, **kwargs: Any) -> Future:
        """Calls ``method(*args, **kwargs)`` on the actor; values from `ActorExecutor.put` and
        `Future.as_argument` arrive as their value."""

    @abc.abstractmethod
    def call_split(self, method: str, num_returns: int, *args: Any, **kwargs: Any) -> list[Future]:
        """Like `call` for a method returning a tuple of ``num_returns`` values: one `Future` each, so a
        small part (counts) can be fetched while a large one (data) is passed on with `Future.as_argument`."""


class ActorExecutor(abc.ABC):
    """Starts actors, shares values with them, waits for their answers, restarts and stops them."""

    @abc.abstractmethod
    def start(self, name: str, factory: Callable[..., Any], *args: Any, restarts: int = 0, cpus: float = 0.0,
              **kwargs: Any) -> ActorHandle:
        """An actor made by ``factory(*args, **kwargs)``; ``restarts`` bounds how often it may be restarted,
        ``cpus`` is what it reserves where the engine schedules by CPUs (0: nothing). It may return before
        the actor is up (Ray does): the first call's answer says whether ``factory`` succeeded."""

    @abc.abstractmethod
    def put(self, value: Any) -> Any:
        """A shared copy of ``value`` to pass to many calls (one copy however many actors receive it)."""

    @abc.abstractmethod
    def wait(self, futures: Sequence[Future], num_returns: int = 1, timeout: float | None = None
             ) -> tuple[list[Future], list[Future]]:
        """``(ready, pending)``: returns once ``num_returns`` are done or after ``timeout`` seconds."""

    @abc.abstractmethod
    def restart(self, handle: ActorHandle) -> None:
        """Replaces the actor by a fresh one from its factory (after a failure, or to reset it).

        Raises:
            ActorFailure: if it may not be restarted any more (its ``restarts`` are used up).
        """

    @abc.abstractmethod
    def kill(self, handle: ActorHandle) -> None:
        """Kills the actor as a crash would (tests of fault handling); calls then fail until `restart`."""

    @abc.abstractmethod
    def shutdown(self) -> None:
        """Stops every actor (and whatever the engine started); the executor cannot be used afterwards."""

    def __enter__(self) -> "ActorExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


# ---- in-process ------------------------------------------------------------------------------------------
class _Done(Future):
    """A call that ran already, in the caller's thread."""

    def __init__(self, value: Any = None, error: ActorFailure | None = None) -> None:
        self._value, self._error = value, error

    def result(self, timeout: float | None = None) -> Any:
        if self._error is not None:
            raise self._error
        return self._value

    def done(self) -> bool:
        return True

    def as_argument(self) -> Any:
        return _Shared(self.result())


class _Shared:
    """A value `InProcessActorExecutor.put` shares (no copy: actors in one process see one object)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _InProcessHandle(ActorHandle):
    def call_split(self, method: str, num_returns: int, *args: Any, **kwargs: Any) -> list[Future]:
        future = self.call(method, *args, **kwargs)
        try:
            values = future.result()
        except ActorFailure:
            return [future] * num_returns
        if not isinstance(values, tuple) or len(values) != num_returns:
            error = ActorFailure(self.name, method, False, f"returned {type(values).__name__}, not a tuple of "
                                                           f"{num_returns} values")
            return [_Done(error=error)] * num_returns
        return [_Done(v) for v in values]

    def __init__(self, name: str, factory: Callable[..., Any], args: tuple, kwargs: dict, restarts: int) -> None:
        super().__init__(name)
        self.factory, self.args, self.kwargs, self.restarts_left = factory, args, kwargs, restarts
        self.lock = threading.Lock()   # one call at a time, as a Ray actor serves them
        self.obj: Any = None
        self.dead = False

    def call(self, method: str, *args: Any, **kwargs: Any) -> Future:
        args = tuple(a.value if isinstance(a, _Shared) else a for a in args)
        kwargs = {k: v.value if isinstance(v, _Shared) else v for k, v in kwargs.items()}
        with self.lock:
            if self.dead:
                return _Done(error=ActorFailure(self.name, method, True, "the actor was killed"))
            try:
                fn = getattr(self.obj, method)
            except AttributeError:
                return _Done(error=ActorFailure(self.name, method, False,
                                                f"{type(self.obj).__name__} has no method {method!r}"))
            try:
                return _Done(fn(*args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - reported to the caller, as a remote error would be
                return _Done(error=ActorFailure(self.name, method, False,
                                                f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


class InProcessActorExecutor(ActorExecutor):
    """Actors as plain objects in this process; each call runs at once in the calling thread.

    Calls to one actor are serialised by a lock (as a Ray actor serves one call at a time), so
    coordination code with several threads behaves as it does on Ray, only without parallelism.
    """

    def __init__(self) -> None:
        self._handles: list[_InProcessHandle] = []
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("InProcessActorExecutor: used after shutdown()")

    def start(self, name: str, factory: Callable[..., Any], *args: Any, restarts: int = 0, cpus: float = 0.0,
              **kwargs: Any) -> ActorHandle:
        self._check_open()
        if not callable(factory):
            raise ValueError(f"InProcessActorExecutor.start({name!r}): factory must be callable; got {factory!r}")
        handle = _InProcessHandle(name, factory, args, kwargs, int(restarts))
        handle.obj = factory(*args, **kwargs)
        self._handles.append(handle)
        return handle

    def put(self, value: Any) -> Any:
        self._check_open()
        return _Shared(value)

    def wait(self, futures: Sequence[Future], num_returns: int = 1, timeout: float | None = None
             ) -> tuple[list[Future], list[Future]]:
        ready = [f for f in futures if f.done()]
        return ready, [f for f in futures if not f.done()]

    def restart(self, handle: ActorHandle) -> None:
        self._check_open()
        assert isinstance(handle, _InProcessHandle)
        with handle.lock:
            if handle.restarts_left == 0:
                raise ActorFailure(handle.name, "restart", True, "no restarts left")
            handle.restarts_left -= 1
            close = getattr(handle.obj, "close", None)
            if callable(close) and not handle.dead:
                close()
            handle.obj = handle.factory(*handle.args, **handle.kwargs)
            handle.dead = False
            handle.incarnation += 1

    def kill(self, handle: ActorHandle) -> None:
        assert isinstance(handle, _InProcessHandle)
        with handle.lock:
            handle.dead = True
            handle.obj = None

    def shutdown(self) -> None:
        for handle in self._handles:
            close = getattr(handle.obj, "close", None)
            if callable(close) and not handle.dead:
                close()
            handle.dead, handle.obj = True, None
        self._handles.clear()
        self._closed = True


def wait_all(executor: ActorExecutor, futures: Sequence[Future], timeout: float) -> list[Any]:
    """The results of ``futures`` in order, waiting at most ``timeout`` seconds in all.

    Raises:
        ActorFailure: the first failed call's.
        TimeoutError: naming how many calls had not answered.
    """
    end = time.monotonic() + timeout
    out = []
    for f in futures:
        out.append(f.result(timeout=max(0.0, end - time.monotonic())))
    return out
