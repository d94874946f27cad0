"""A local Ray instance only this machine can reach, and joining a cluster with its token.

`init_local_ray` starts Ray as Ray 2.60 intends for a single machine, with two things made explicit:

* **Token authentication on, with a token of its own.** A fresh random token is written to a private
  temporary folder (``0700``, the file ``0600``) and handed to Ray through ``RAY_AUTH_MODE=token`` and
  ``RAY_AUTH_TOKEN_PATH`` in this process's environment, which the GCS server, the raylet, the agents and
  every worker inherit. Every gRPC call into the instance must carry it; nothing is written to
  ``~/.ray/auth_token`` (what a plain ``ray.init()`` does when no token exists). `shutdown_local_ray`
  restores the three ``RAY_AUTH_*`` variables as they were and deletes the token. ``RAY_AUTH_MODE=disabled``
  in the environment is ignored for these instances (said once on stderr): nothing outside this machine
  needs to reach them.
* **Every Ray listener on 127.0.0.1.** Ray turns ``_node_ip_address="127.0.0.1"`` into the machine's
  routable address (``resolve_ip_for_localhost``) unless it runs as a local-only instance, the mode it uses
  on macOS and Windows (``ray_constants.ENABLE_RAY_CLUSTER`` false: the node IP stays the loopback address).
  With the node IP 127.0.0.1 the GCS server, the raylet (node manager and object manager), the runtime-env
  agent and every worker bind ``127.0.0.1`` only (measured with psutil: without it they bound ``::``, all
  interfaces). That mode is switched on only for the duration of ``ray.init``; the instance's address is
  checked afterwards and a node on another address is shut down with an error.

Joining a running cluster (``address="HOST:PORT"``) is Ray's own: the cluster's token must be given the way
Ray reads it, ``RAY_AUTH_MODE=token`` and the token in ``RAY_AUTH_TOKEN`` (or in a file named by
``RAY_AUTH_TOKEN_PATH``, or in ``~/.ray/auth_token``; ``ray get-auth-token`` prints a cluster's token on its
head node). `refresh_auth_state` makes Ray re-read those variables before a join.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Iterator

import ray

from harness.execution.loopback import LOOPBACK, host_of, is_loopback

#: The environment variables Ray's token authentication reads (mode, token, token file).
AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
#: What Ray's errors say when a local node was too slow to come up (see `_init_with_retries`).
_STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")


class RayStartTimeout(Exception):
    """Ray's node did not come up in time (Ray raises a bare ``Exception`` for it)."""


class _LocalInstance:
    """The token and the saved ``RAY_AUTH_*`` variables of the local instance this process started."""

    def __init__(self) -> None:
        self.saved = {name: os.environ.get(name) for name in AUTH_VARIABLES}
        self.folder = tempfile.mkdtemp(prefix="spacegraph-ray-auth-")  # mode 0700
        self.token_path = os.path.join(self.folder, "auth_token")
        descriptor = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as fh:
            fh.write(os.urandom(32).hex())
        os.environ.pop("RAY_AUTH_TOKEN", None)  # (it would win over the file)
        os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=self.token_path)
        refresh_auth_state()

    def end(self) -> None:
        """Puts the variables back, makes Ray forget the token, then deletes it."""
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        refresh_auth_state()
        shutil.rmtree(self.folder, ignore_errors=True)


_current: _LocalInstance | None = None
_said_disabled_is_ignored = False


def refresh_auth_state() -> None:
    """Makes this process's Ray re-read ``RAY_AUTH_MODE`` and its token from the environment.

    Ray caches both (its config and its token loader); the config is refreshed first, so that a gRPC thread
    still draining never reloads a token that is about to go (as Ray's own test utilities do).
    """
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def local_token_path() -> str | None:
    """The token file of the local instance this process runs (None: none runs)."""
    return _current.token_path if _current is not None else None


@contextmanager
def _local_only_node() -> Iterator[None]:
    """Ray's local-only mode (its node IP stays the loopback address) while a local node starts."""
    from ray._private import ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


def _node_ip() -> str:
    from ray._private.worker import _global_node  # noqa: PLC0415 - private: the started node's address

    return _global_node.node_ip_address if _global_node is not None else ""


def init_local_ray(attempts: int = 3, **kwargs: Any) -> None:
    """``ray.init`` of a new local instance on 127.0.0.1 with token authentication and a token of its own.

    Args:
        attempts: how often a node that times out during start-up is started again.
        **kwargs: further `ray.init` arguments (``num_cpus``, ``object_store_memory``, ``runtime_env``, ...);
            ``address`` and ``_node_ip_address`` are set here.

    Raises:
        RuntimeError: when Ray runs in this process already, or the node came up on another address.
        Exception: what ``ray.init`` raises (a start-up timeout after ``attempts`` tries as `RayStartTimeout`).
    """
    global _current, _said_disabled_is_ignored
    if ray.is_initialized():
        raise RuntimeError("init_local_ray: Ray is initialised in this process already")
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "disabled" and not _said_disabled_is_ignored:
        _said_disabled_is_ignored = True
        print("spacegraph: RAY_AUTH_MODE=disabled is ignored: the local Ray instance runs with token "
              "authentication and a token of its own", file=sys.stderr)
    instance = _LocalInstance()
    try:
        with _local_only_node():
            _init_with_retries(dict(kwargs, address="local", _node_ip_address=LOOPBACK), attempts)
        if not is_loopback(_node_ip()):
            where = _node_ip()
            ray.shutdown()
            raise RuntimeError(f"the local Ray node came up on {where}, not on {LOOPBACK}: refusing to run it")
    except BaseException:
        instance.end()
        raise
    _current = instance


def join_ray(address: str, **kwargs: Any) -> None:
    """``ray.init(address=address, **kwargs)``: joins a running cluster, with its token as Ray reads it.

    Ray's ``RAY_AUTH_*`` state is re-read from the environment first. A loopback address (an instance such as
    `init_local_ray` starts, in another process of this machine) is joined in Ray's local-only mode, as it was
    started: otherwise Ray would replace 127.0.0.1 by the machine's routable address, where nothing listens.
    """
    refresh_auth_state()
    host = host_of(address)
    if is_loopback(host):
        with _local_only_node():
            ray.init(address=address, _node_ip_address=LOOPBACK, **kwargs)
    else:
        ray.init(address=address, **kwargs)


def shutdown_local_ray() -> None:
    """``ray.shutdown()``, then the ``RAY_AUTH_*`` variables as they were before `init_local_ray`, token deleted."""
    global _current
    ray.shutdown()
    if _current is not None:
        _current.end()
        _current = None


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


def _own_sessions() -> set[str]:
    """The session folders of local Ray instances this process started (Ray names them ``session_*_<pid>``)."""
    import glob

    root = os.path.join(os.environ.get("RAY_TMPDIR", tempfile.gettempdir()), "ray")
    return set(glob.glob(os.path.join(root, f"session_*_{os.getpid()}")))


def _init_with_retries(kwargs: dict[str, Any], attempts: int) -> None:
    """``ray.init(**kwargs)``, tried again (up to ``attempts`` times) when the local node times out during
    start-up, which Ray allows 30 s and a loaded 2-core machine sometimes needs more for (Ray says "timed out
    during startup", or, when its GCS server has not written its port file in time, "Timed out waiting for
    file"); the processes of the node that did not come up are killed first (only this process's sessions:
    another process's Ray instance on the machine is left alone)."""
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
    raise RayStartTimeout(f"the local Ray node did not start in {attempts} tries: {failed}")
