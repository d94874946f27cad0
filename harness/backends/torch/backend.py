"""The PyTorch 2 backend: parameters and a contracted define-by-run call chain per API method."""

from __future__ import annotations

import re
import threading
from typing import Any, Callable

import numpy as np
import optree
import torch

from harness.backends.base import Backend, map_structure
from harness.backends.host_ops import HostOps
from harness.backends.torch.ops import TorchOps
from harness.spaces import Space

_TF_STYLE = re.compile(r"^/?(?:device:)?(cpu|gpu|cuda)(?::(\d+))?$", re.IGNORECASE)


#: Outputs of at most this many elements leave `TorchBackend.to_numpy` through ``tolist`` (see there).
SMALL_OUTPUT = 16
#: The torch dtypes whose every value a Python number holds exactly, with their NumPy dtypes.
_EXACT_IN_PYTHON = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16,
                    torch.int64: np.int64, torch.int32: np.int32, torch.int16: np.int16, torch.int8: np.int8,
                    torch.uint8: np.uint8, torch.bool: np.bool_}


#: Switches the calling thread's flushing of denormal floats on or off (see `TorchBackend.compile_api`).
_set_flush_denormal = torch.set_flush_denormal


def torch_device(device: str) -> torch.device:
    """A `torch.device` from a torch name (``"cpu"``, ``"cuda:0"``) or a TF-style one (``"/gpu:0"``)."""
    m = _TF_STYLE.match(device)
    if m:
        kind = "cpu" if m.group(1).lower() == "cpu" else "cuda"
        return torch.device(kind if m.group(2) is None else f"{kind}:{m.group(2)}")
    return torch.device(device)


class TorchBackend(Backend):
    """PyTorch: trainable float variables are `torch.nn.Parameter`s; API calls run the
    flat call chain in inference mode (`torch.inference_mode`: no recording, no version counters), or
    with autograd where a step declares ``@graph_fn(gradients=True)`` (see `Backend.compile_api`).

    Graph functions of scalars only (an exploration schedule's epsilon at a time step) run on the
    host in NumPy (``host_ops``, see `harness.graph.steps.host_step`): each of their ops on a 0-d
    tensor would cost an eager dispatch per call, about ten times the NumPy scalar op.
    """

    name = "torch"

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.ops = TorchOps(self.seed)
        self.host_ops = HostOps()
        # Held while a traced method records a trace (with the graph's variables' requires_grad off) and, once
        # a method is traced, by every gradient-recording call: the two never overlap (see `trace_api`).
        self._recording = threading.Lock()
        self._traced = False

    def make_variable(self, path: str, value: np.ndarray, trainable: bool, device: str | None) -> Any:
        tensor = torch.from_numpy(np.array(value, copy=True))
        if device:
            tensor = tensor.to(torch_device(device))
        if tensor.dtype.is_floating_point:
            return torch.nn.Parameter(tensor, requires_grad=trainable)
        return tensor

    def variable_value(self, var: Any) -> np.ndarray:
        return var.detach().cpu().numpy().copy()

    def assign_variable(self, var: Any, value: np.ndarray) -> None:
        with torch.no_grad():
            var.copy_(torch.from_numpy(np.asarray(value)))

    def to_tensor(self, value: np.ndarray) -> Any:
        return torch.as_tensor(value)

    def feed(self, value: np.ndarray) -> Any:
        # The executor feeds arrays already cast to their space's dtype: from_numpy shares their memory
        # (~0.5 us a call against ~1.1 us for as_tensor); arrays it cannot share (negative strides, a reversed
        # view) are copied first (as_tensor refuses them too).
        try:
            return torch.from_numpy(value)
        except ValueError:
            return torch.from_numpy(np.array(value, copy=True, order="C"))
        except TypeError:
            return torch.as_tensor(value)

    def to_numpy(self, tensor: Any) -> np.ndarray:
        # A copy: a graph function may return a variable (or a view of one) whose memory
        # later API calls change; a CPU tensor's .numpy() would alias it.
        # is_cpu: ~0.07 us a call against ~0.5 us for device.type (which builds a device object), on every output
        if tensor.is_cpu and not tensor.requires_grad:
            # A small output (a batch of actions, a loss) leaves as Python numbers, in the same dtype and shape:
            # measured inside a 1-env CartPole worker, ``numpy().copy()`` of a fresh one-element tensor cost about
            # 7 us a step more than ``tolist``, though about 1 us more alone. Empty tensors take the NumPy path
            # (``tolist`` would lose their shape).
            dtype = _EXACT_IN_PYTHON.get(tensor.dtype)
            if dtype is not None and 0 < tensor.numel() <= SMALL_OUTPUT:
                return np.array(tensor.tolist(), dtype)
            return tensor.numpy().copy()
        return tensor.detach().cpu().numpy().copy()

    def host_value(self, tensor: Any) -> Any:
        return tensor.item() if isinstance(tensor, torch.Tensor) else tensor

    def from_host(self, value: Any, dtype: np.dtype) -> Any:
        return torch.from_numpy(np.asarray(value, dtype))

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor)

    def tensor_shape_dtype(self, tensor: Any) -> tuple[tuple[int, ...], np.dtype]:
        return tuple(tensor.shape), np.dtype(str(tensor.dtype).replace("torch.", ""))

    def device_scope(self, device: str | None) -> Any:
        return torch.device(torch_device(device)) if device else torch.device("cpu")

    def place(self, fn: Callable, device: str) -> Callable:
        dev = torch_device(device)

        def move(x: Any) -> Any:
            return x.to(dev) if isinstance(x, torch.Tensor) and x.device != dev else x

        def placed(*args: Any) -> Any:
            return fn(*optree.tree_map(move, args))

        if dev.type == "cpu":  # tensors are made on the CPU anyway: no device context (it costs per op)
            return placed

        def placed_on_device(*args: Any) -> Any:
            with dev:  # tensors the step creates itself (random draws, zeros, constants) go to the device too
                return fn(*optree.tree_map(move, args))
        return placed_on_device

    def check_device(self, device: str) -> None:
        try:
            dev = torch_device(device)
        except (RuntimeError, ValueError) as exc:
            raise ValueError(f"backend 'torch': bad device name {device!r} ({exc})") from None
        if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
            raise ValueError(f"backend 'torch': device {device!r} does not exist here "
                             f"(cuda devices: {torch.cuda.device_count()})")

    def compile_api(self, name: str, fn: Callable, arg_spaces: dict[str, Space], gradients: bool = False) -> Callable:
        # A method that records gradients runs with grad mode on, switched directly rather than through
        # torch.enable_grad() used as a decorator, which makes a context object per call (a few microseconds,
        # measurable at batch 1). Every other method runs in inference mode: like no_grad it records nothing,
        # and it also skips the version counters and view tracking of the tensors it makes (about a tenth of a
        # CartPole act). The tensors such a call makes are inference tensors, which a later recording call
        # must not save for backward: none reaches one. Outputs leave as NumPy copies, variables are changed in
        # place (inference mode allows that on ordinary tensors, and bumps their version counters), and the one
        # tensor kept between calls, a convolution kernel's OIHW copy (`ops._oihw`), is read only outside
        # recording.
        # Either runs with denormal floats flushed to zero in the calling thread (the CPU's control register; the
        # replayed and traced forms of a method run inside this call), as TensorFlow's compute threads run, and
        # switches that off again on return, so the caller's own NumPy code keeps its denormals. A CPU takes
        # 20-100x longer on denormal operands, and an optimizer's decaying moments reach them: RMSProp's mean
        # square of a weight whose gradient stays zero (an always-empty MinAtar channel) passes 1e-38 after about
        # 1,700 updates of decay 0.95, and its square root took a fifth of a MinAtar Freeway DQN update. The two
        # switches cost about 0.1 us a call. torch's intra-op worker threads (more than one torch thread) keep
        # their own setting.
        if not gradients:
            inference = torch._C._InferenceMode

            def call(*args: Any) -> Any:
                _set_flush_denormal(True)
                try:
                    with inference(True):
                        return fn(*args)
                finally:
                    _set_flush_denormal(False)
        else:
            is_enabled, set_enabled = torch.is_grad_enabled, torch._C._set_grad_enabled
            recording = self._recording

            def record(*args: Any) -> Any:
                previous = is_enabled()
                set_enabled(True)
                _set_flush_denormal(True)
                try:
                    return fn(*args)
                finally:
                    _set_flush_denormal(False)
                    set_enabled(previous)

            def call(*args: Any) -> Any:
                if not self._traced:  # no traced method: nothing can switch the variables' requires_grad off
                    return record(*args)
                with recording:  # wait for a trace being recorded in another thread
                    return record(*args)

        call.__name__ = call.__qualname__ = name
        call.__wrapped__ = fn  # type: ignore[attr-defined]
        return call

    def trace_api(self, name: str, chain: Callable, arg_spaces: dict[str, Space], variables: list[Any],
                  where: str = "") -> Callable:
        from harness.backends.torch.tracing import TracedApi

        # A trace is recorded with the variables' requires_grad off. A gradient-recording method of the same
        # graph running meanwhile in another thread would get a loss without history and zero gradients, so
        # recording a trace and such calls take the same lock.
        self._traced = True
        return TracedApi(name, chain, variables, where, recording=self._recording)

    replays = True

    def replay_api(self, name: str, chain: Callable, fallback: Callable) -> Callable:
        from harness.backends.torch.replay import ReplayedApi

        return ReplayedApi(name, chain, fallback).dispatch

    def replay_host(self, fn: Callable) -> Callable:
        from harness.backends.torch.replay import opaque

        return opaque(fn)   # recorded as one call: a replay runs it on the host, as the eager chain does

    def check_traceable(self, name: str, chain: Callable, arg_spaces: dict[str, Space], variables: list[Any],
                        where: str = "") -> None:
        from harness.backends.torch.tracing import check_traceable

        with torch.inference_mode():  # as the method runs (compile_api)
            check_traceable(name, chain, arg_spaces, variables, where)

    def to_device(self, value: Any, device: str | None = None) -> Any:
        target = torch_device(device) if device else torch.device("cuda" if torch.cuda.is_available() else "cpu")
        pin = target.type == "cuda"

        def move(leaf: Any) -> Any:
            tensor = leaf if isinstance(leaf, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(leaf))
            if pin and tensor.device.type == "cpu":
                tensor = tensor.pin_memory()  # page-locked: the copy below can run asynchronously
            return tensor.to(target, non_blocking=True)
        return map_structure(move, value)

    def reset_rng(self) -> None:
        self.ops.reset_rng()
