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




def ray_session_processes(session_dir: str) -> list[int]:
    """Process ids on this machine whose command line names ``session_dir`` (what a Ray session left)."""
    out = []
    key = os.path.basename(session_dir.rstrip(os.sep))
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if key and key in cmd:
            out.append(int(pid))
    return out


def wait_session_gone(session_dir: str, timeout: float = 20.0) -> list[int]:
    """Polls until no process of the Ray session is left; returns those still there after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    left = ray_session_processes(session_dir)
    while left and time.monotonic() < end:
        time.sleep(0.25)
        left = ray_session_processes(session_dir)
    return left


class RayActorExecutor(ActorExecutor):
    """Actors as Ray actors, each in its own process.

    Starts a local Ray instance on 127.0.0.1 (``address=None``) or joins a running cluster
    (``address="HOST:PORT"`` or ``"auto"``); when Ray is already initialised in this process it is
    used as it is and left running by `shutdown`.

    Args:
        address: a cluster to join, or None to start one here.
        num_cpus: logical CPUs of a local instance (default ``os.cpu_count()``); actors started with
            ``cpus=0`` (the default) reserve none, so more actors than cores may run.
        object_store_memory: bytes of a local instance's object store (default 256 MiB).
        env: extra environment variables for every actor process (added to `ACTOR_ENV`).
        start_timeout: seconds to wait for an actor to come up in `start` and `restart`.
    """

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 object_store_memory: int | None = 256 * 1024 * 1024, env: dict[str, str] | None = None,
                 start_timeout: float = 120.0) -> None:
        self.start_timeout = float(start_timeout)
        self._handles: list[_RayHandle] = []
        self._owns = not ray.is_initialized()
        env_vars = dict(ACTOR_ENV, **(env or {}))
        if self._owns:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True,
                                      "runtime_env": {"env_vars": env_vars}, "configure_logging": False}
            if address is None:
                # "local": a new instance even when another cluster runs on this machine (never join it by chance)
                kwargs.update(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                              object_store_memory=object_store_memory, _node_ip_address="127.0.0.1")
            else:
                kwargs["address"] = address
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            try:
                _init_with_retries(kwargs, attempts=3 if address is None else 1)
            except (ConnectionError, RuntimeError, ValueError, _StartupTimeout) as exc:
                where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
                raise RuntimeError(f"RayActorExecutor: cannot start or join {where}: {exc}") from exc
        self.session_dir = _session_dir()
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
        if self._owns and ray.is_initialized():
            ray.shutdown()


class _StartupTimeout(Exception):
    """Ray's node did not come up in time (Ray raises a bare ``Exception`` for it)."""


def _own_sessions() -> set[str]:
    """The session folders of local Ray instances this process started (Ray names them ``session_*_<pid>``)."""
    import glob
    import tempfile

    root = os.path.join(os.environ.get("RAY_TMPDIR", tempfile.gettempdir()), "ray")
    return set(glob.glob(os.path.join(root, f"session_*_{os.getpid()}")))


#: What Ray's errors say when a local node was too slow to come up (see `_init_with_retries`).
_STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")


def _init_with_retries(kwargs: dict[str, Any], attempts: int) -> None:
    """``ray.init(**kwargs)``, tried again (up to ``attempts`` times) when the local node times out during
    start-up, which Ray allows 30 s and a loaded 2-core machine sometimes needs more for (Ray says "timed out
    during startup", or, when its GCS server has not written its port file in time, "Timed out waiting for
    file"); the processes of the node that did not come up are killed first (only this process's sessions:
    another process's Ray instance on the machine is left alone)."""
    import signal

    for attempt in range(attempts):
        before = _own_sessions()
        try:
            ray.init(**kwargs)
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for a node that did not start
            if not any(sign in str(exc) for sign in _STARTUP_TIMEOUTS):
                raise
            failed = exc
        try:
            ray.shutdown()
        except Exception:  # noqa: BLE001 - nothing was fully started
            pass
        for session in _own_sessions() - before:
            for pid in ray_session_processes(session):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            wait_session_gone(session, timeout=10.0)
        if attempt + 1 < attempts:
            time.sleep(2.0 * (attempt + 1))
    raise _StartupTimeout(f"the local Ray node did not start in {attempts} tries: {failed}")


def _session_dir() -> str:
    try:
        from ray._private.worker import _global_node  # noqa: PLC0415 - private, only for the session path

        return _global_node.get_session_dir_path() if _global_node is not None else ""
    except Exception:  # noqa: BLE001
        return ""
