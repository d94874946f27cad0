"""`RayActorExecutor`: actors of any factory as Ray actors, behind the `ActorExecutor` interface."""

from __future__ import annotations

import os
import re
import time
import traceback
from typing import Any, Callable, Sequence

import ray
import ray.exceptions

from harness.execution.actors import ActorExecutor, ActorFailure, ActorHandle, Future
from harness.execution.ray.local import (  # noqa: F401 (ray_session_processes, wait_session_gone: re-exported)
    RayStartTimeout, init_local_ray, join_ray, ray_session_processes, shutdown_local_ray,
    wait_session_gone)

#: How a cluster's token is given when joining it (``--address``), as Ray 2.60 reads it.
JOIN_TOKEN_HELP = ("a cluster with token authentication needs RAY_AUTH_MODE=token and its token in RAY_AUTH_TOKEN, "
                   "in a file named by RAY_AUTH_TOKEN_PATH, or in ~/.ray/auth_token; `ray get-auth-token` on its "
                   "head node prints it")

#: Environment of every actor process: one framework thread each (set the thread count explicitly
#: where more are wanted), quiet TensorFlow.
ACTOR_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
             "TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}


class _ActorHost:
    """The Ray actor around one object: builds it from the factory and calls its methods by name."""

    def __init__(self, factory: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self._spec = (factory, args, kwargs)
        self._obj = factory(*args, **kwargs)

    def call(self, method: str, kwargs: dict, *args: Any) -> Any:
        # the arguments travel as direct task arguments, so shared values (ObjectRefs) arrive as values
        return getattr(self._obj, method)(*args, **kwargs)

    def reset(self) -> int:
        """Rebuilds the object in this process (a restart that keeps the process)."""
        close = getattr(self._obj, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - an object being replaced after a failure may not close cleanly
                pass
        factory, args, kwargs = self._spec
        self._obj = factory(*args, **kwargs)
        return os.getpid()

    def pid(self) -> int:
        return os.getpid()


_RemoteHost = ray.remote(_ActorHost)


#: Terminal colour codes Ray puts in its error texts.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _failure(name: str, method: str, exc: BaseException) -> ActorFailure:
    """An `ActorFailure` whose detail starts, as the in-process executor's does, with the actor's own error
    (``Type: message``), then Ray's text with the remote traceback (colour codes removed)."""
    text = _ANSI.sub("", str(exc))
    if isinstance(exc, ray.exceptions.RayActorError):
        return ActorFailure(name, method, True, f"{type(exc).__name__}: {text}")
    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = getattr(exc, "cause", None)
        head = f"{type(cause).__name__}: {cause}" if cause is not None else "error"
        return ActorFailure(name, method, False, f"{head}\n{text}")
    return ActorFailure(name, method, True, f"{type(exc).__name__}: {text}")


class _RayFuture(Future):
    def __init__(self, ref: ray.ObjectRef, name: str, method: str) -> None:
        self.ref, self.name, self.method = ref, name, method

    def result(self, timeout: float | None = None) -> Any:
        try:
            value = ray.get(self.ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(f"actor {self.name!r} did not answer {self.method}() within {timeout} s") from None
        except (ray.exceptions.RayError, OSError) as exc:
            raise _failure(self.name, self.method, exc) from None
        return value

    def done(self) -> bool:
        ready, _ = ray.wait([self.ref], timeout=0)
        return bool(ready)

    def as_argument(self) -> Any:
        return self.ref


class _RayHandle(ActorHandle):
    def __init__(self, name: str, actor: Any, restarts: int) -> None:
        super().__init__(name)
        self.actor, self.restarts_left = actor, restarts

    def call(self, method: str, *args: Any, **kwargs: Any) -> Future:
        # ObjectRefs at the top level of args arrive as their values: pass them as separate arguments
        if any(isinstance(v, ray.ObjectRef) for v in kwargs.values()):
            raise ValueError(f"RayActorExecutor: pass shared values (put) positionally to {self.name}.{method}()")
        return _RayFuture(self.actor.call.remote(method, kwargs, *args), self.name, method)

    def call_split(self, method: str, num_returns: int, *args: Any, **kwargs: Any) -> list[Future]:
        refs = self.actor.call.options(num_returns=int(num_returns)).remote(method, kwargs, *args)
        return [_RayFuture(r, self.name, method) for r in (refs if isinstance(refs, list) else [refs])]


class RayActorExecutor(ActorExecutor):
    """Actors as Ray actors, each in its own process.

    Starts a local Ray instance (``address=None``, `init_local_ray`: every Ray process listens on 127.0.0.1
    only, token authentication on with a token of its own) or joins a running cluster (``address="HOST:PORT"``
    or ``"auto"``); when Ray is already initialised in this process it is used as it is and left running by
    `shutdown`.

    Joining a cluster that has token authentication on (Ray's default for new clusters) takes its token the
    way Ray reads it: ``RAY_AUTH_MODE=token`` and the token in ``RAY_AUTH_TOKEN``, or in a file named by
    ``RAY_AUTH_TOKEN_PATH``, or in ``~/.ray/auth_token`` (``ray get-auth-token`` on the head node prints it).

    Args:
        address: a cluster to join, or None to start one here.
        num_cpus: logical CPUs of a local instance (default ``os.cpu_count()``); actors started with
            ``cpus=0`` (the default) reserve none, so more actors than cores may run.
        object_store_memory: bytes of a local instance's object store (default 256 MiB).
        env: extra environment variables for every actor process (added to `ACTOR_ENV`).
        start_timeout: seconds to wait for an actor to come up in `start` and `restart`.

    Raises:
        RuntimeError: naming the local instance or the cluster's address and why it could not be started or
            joined (for a refused token: which variables give it).
    """

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 object_store_memory: int | None = 256 * 1024 * 1024, env: dict[str, str] | None = None,
                 start_timeout: float = 120.0) -> None:
        self.start_timeout = float(start_timeout)
        self._handles: list[_RayHandle] = []
        self._owns = not ray.is_initialized()
        self._local = self._owns and address is None
        env_vars = dict(ACTOR_ENV, **(env or {}))
        if self._owns:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True,
                                      "runtime_env": {"env_vars": env_vars}, "configure_logging": False}
            where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
            try:
                if self._local:
                    init_local_ray(num_cpus=num_cpus or os.cpu_count() or 1,
                                   object_store_memory=object_store_memory, **kwargs)
                else:
                    join_ray(address, **kwargs)
            except (ConnectionError, RuntimeError, ValueError, RayStartTimeout,
                    ray.exceptions.AuthenticationError) as exc:
                if _refused_token(exc):
                    raise RuntimeError(f"RayActorExecutor: {where} refused this process's token (missing or "
                                       f"wrong): {JOIN_TOKEN_HELP}") from None
                raise RuntimeError(f"RayActorExecutor: cannot start or join {where}: {exc}") from exc
        self.session_dir = ray_session_dir()
        self._closed = False

    def start(self, name: str, factory: Callable[..., Any], *args: Any, restarts: int = 0, cpus: float = 0.0,
              **kwargs: Any) -> ActorHandle:
        """Starts the actor without waiting for it: its first call's answer says whether ``factory`` succeeded."""
        if self._closed:
            raise RuntimeError("RayActorExecutor: used after shutdown()")
        actor = _RemoteHost.options(max_restarts=max(int(restarts), 0), max_task_retries=0, num_cpus=cpus,
                                    name=None).remote(factory, args, kwargs)
        handle = _RayHandle(name, actor, int(restarts))
        self._handles.append(handle)
        return handle

    def put(self, value: Any) -> Any:
        return ray.put(value)

    def wait(self, futures: Sequence[Future], num_returns: int = 1, timeout: float | None = None
             ) -> tuple[list[Future], list[Future]]:
        if not futures:
            return [], []
        by_ref = {f.ref: f for f in futures}  # type: ignore[attr-defined]
        ready, pending = ray.wait(list(by_ref), num_returns=min(num_returns, len(by_ref)), timeout=timeout)
        return [by_ref[r] for r in ready], [by_ref[r] for r in pending]

    def restart(self, handle: ActorHandle) -> None:
        assert isinstance(handle, _RayHandle)
        if handle.restarts_left == 0:
            raise ActorFailure(handle.name, "restart", True, "no restarts left")
        handle.restarts_left -= 1
        deadline = time.monotonic() + self.start_timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                # alive: rebuild the object in place; restarting after a crash: Ray re-runs the factory
                ray.get(handle.actor.reset.remote(), timeout=max(1.0, deadline - time.monotonic()))
                handle.incarnation += 1
                return
            except ray.exceptions.ActorDiedError as exc:
                if "restart" not in str(exc).lower() and "max_restarts" in str(exc):
                    raise _failure(handle.name, "restart", exc) from None
                last = exc
            except ray.exceptions.RayActorError as exc:
                last = exc
            except ray.exceptions.RayTaskError as exc:
                raise ActorFailure(handle.name, "restart", False, f"its factory raised: {exc}") from None
            except ray.exceptions.GetTimeoutError as exc:
                last = exc
            time.sleep(0.2)
        raise ActorFailure(handle.name, "restart", True, f"did not come back within {self.start_timeout} s: "
                                                         f"{last!r}")

    def kill(self, handle: ActorHandle) -> None:
        assert isinstance(handle, _RayHandle)
        ray.kill(handle.actor, no_restart=False)

    def pid(self, handle: ActorHandle, timeout: float = 30.0) -> int:
        """The process id of an actor (tests check processes are gone)."""
        assert isinstance(handle, _RayHandle)
        return int(ray.get(handle.actor.pid.remote(), timeout=timeout))

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        for handle in self._handles:
            try:
                ray.kill(handle.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                traceback.format_exc()
        self._handles.clear()
        if self._local:
            shutdown_local_ray()
        elif self._owns and ray.is_initialized():
            ray.shutdown()


def _refused_token(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an error it came from is Ray's refusal of a missing or wrong token (Ray wraps it in a
    ``ConnectionError`` when joining)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ray.exceptions.AuthenticationError) or "InvalidAuthToken" in str(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def ray_session_dir() -> str:
    try:
        from ray._private.worker import _global_node  # noqa: PLC0415 - private, only for the session path

        return _global_node.get_session_dir_path() if _global_node is not None else ""
    except Exception:  # noqa: BLE001
        return ""
