"""A local Ray instance runs with token authentication and a token of its own, and only on 127.0.0.1: a gRPC
call into its GCS server without the token (or with another) is refused, a process joining it without the
token gets one clear error, and stopping it puts the ``RAY_AUTH_*`` variables back and deletes the token."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

pytestmark = pytest.mark.distributed

#: As the suite's `ray_executor` fixture starts Ray (conftest.py).
RAY_CPUS, RAY_OBJECT_STORE = 2, 160 * 1024 * 1024

AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def gcs_call(address: str, token: str | None) -> str:
    """``GetAllJobInfo`` on the GCS server at ``address``: ``"ok"`` or the gRPC status code's name."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    metadata = [("authorization", f"Bearer {token}")] if token is not None else []
    with grpc.insecure_channel(address) as channel:
        stub = gcs_service_pb2_grpc.JobInfoGcsServiceStub(channel)
        try:
            stub.GetAllJobInfo(gcs_service_pb2.GetAllJobInfoRequest(), timeout=30, metadata=metadata)
        except grpc.RpcError as exc:
            return exc.code().name
    return "ok"


@pytest.mark.parametrize("mode", [None, "disabled"], ids=["RAY_AUTH_MODE unset", "RAY_AUTH_MODE=disabled"])
def test_a_local_instance_refuses_calls_without_its_token(tmp_path, monkeypatch, capfd, loopback_listeners, mode):
    pytest.importorskip("ray")
    import ray

    from harness.execution.ray import RayActorExecutor, local, local_token_path, wait_session_gone

    monkeypatch.setattr(local, "_said_disabled_is_ignored", False)
    monkeypatch.setenv("HOME", str(tmp_path))  # (a plain ray.init would write ~/.ray/auth_token)
    for name in AUTH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if mode is not None:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    loopback_listeners.record_all = True
    executor = RayActorExecutor(num_cpus=RAY_CPUS, object_store_memory=RAY_OBJECT_STORE)
    try:
        token_file = local_token_path()
        assert os.environ["RAY_AUTH_MODE"] == "token" and os.environ["RAY_AUTH_TOKEN_PATH"] == token_file
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(token_file)).st_mode) == 0o700
        with open(token_file) as fh:
            token = fh.read()
        address = ray.get_runtime_context().gcs_address
        assert address.startswith("127.0.0.1:")
        assert gcs_call(address, None) == "UNAUTHENTICATED"
        assert gcs_call(address, "0" * len(token)) == "UNAUTHENTICATED"
        assert gcs_call(address, token) == "ok"
        assert executor.start("d", dict).call("keys").result(timeout=120) is not None
        names = {item.name for item in loopback_listeners.everything}
        assert {"gcs_server", "raylet"} <= names, names  # the watch sees Ray's own processes
    finally:
        executor.shutdown()
        assert not wait_session_gone(executor.session_dir)
    assert {name: os.environ.get(name) for name in AUTH_VARIABLES} == {
        "RAY_AUTH_MODE": mode, "RAY_AUTH_TOKEN": None, "RAY_AUTH_TOKEN_PATH": None}
    assert not os.path.exists(os.path.dirname(token_file))
    assert not (tmp_path / ".ray").exists()
    assert ("RAY_AUTH_MODE=disabled is ignored" in capfd.readouterr().err) == (mode == "disabled")


JOIN = """
import sys
from harness.execution.ray import RayActorExecutor
try:
    RayActorExecutor(address=sys.argv[1])
except RuntimeError as exc:
    print(exc)
    sys.exit(3)
print("joined")
"""


def test_joining_without_the_token_is_refused_with_one_clear_error(ray_executor, tmp_path):
    import ray

    env = {k: v for k, v in os.environ.items() if k not in AUTH_VARIABLES}
    env["HOME"] = str(tmp_path)
    run = subprocess.run([sys.executable, "-c", JOIN, ray.get_runtime_context().gcs_address], env=env,
                         capture_output=True, text=True, timeout=240, cwd=os.getcwd())
    assert run.returncode == 3, run.stdout + run.stderr[-3000:]
    last = run.stdout.strip().splitlines()[-1]
    assert "refused this process's token (missing or wrong)" in last
    assert "RAY_AUTH_MODE=token" in last and "RAY_AUTH_TOKEN" in last and "RAY_AUTH_TOKEN_PATH" in last
