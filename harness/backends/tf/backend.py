"""The TensorFlow 2 backend: `tf.Variable`s and one `tf.function` per root API method."""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from harness.backends.base import Backend, map_structure
from harness.backends.tf.ops import TFOps
from harness.spaces import Dict, Space, Tuple


class TFBackend(Backend):
    """TensorFlow: variables are `tf.Variable`; each root API method is a `tf.function`
    whose input signature comes from the argument spaces (batch/time ranks as None).

    Args:
        seed: seeds initial values and the ops' random generator.
        jit_compile: compile API functions with XLA.
    """

    name = "tf"

    def __init__(self, seed: int = 0, jit_compile: bool = False) -> None:
        super().__init__(seed)
        self.jit_compile = jit_compile
        self.ops = TFOps(self.seed)

    def make_variable(self, path: str, value: np.ndarray, trainable: bool, device: str | None) -> Any:
        with self.device_scope(device):
            return tf.Variable(value, trainable=trainable, name=path.rsplit("/", 1)[-1])

    def variable_value(self, var: Any) -> np.ndarray:
        return np.array(var.numpy(), copy=True)

    def assign_variable(self, var: Any, value: np.ndarray) -> None:
        var.assign(value)

    def to_tensor(self, value: np.ndarray) -> Any:
        return tf.convert_to_tensor(value)

    def feed(self, value: np.ndarray) -> Any:
        return value  # tf.function converts NumPy inputs against its signature

    def to_numpy(self, tensor: Any) -> np.ndarray:
        return tensor.numpy()

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, (tf.Tensor, tf.Variable))

    def tensor_shape_dtype(self, tensor: Any) -> tuple[tuple[int, ...], np.dtype]:
        return tuple(int(d) for d in tensor.shape), np.dtype(tensor.dtype.as_numpy_dtype)

    def device_scope(self, device: str | None) -> Any:
        return tf.device(device) if device else contextlib.nullcontext()

    def place(self, fn: Callable, device: str) -> Callable:
        def placed(*args: Any) -> Any:
            with tf.device(device):  # only entered while tf.function traces
                return fn(*args)
        return placed

    def check_device(self, device: str) -> None:
        try:
            spec = tf.DeviceSpec.from_string(device)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"backend 'tf': bad device name {device!r} ({exc})") from None
        if spec.job is not None or spec.device_type is None:
            return  # a remote task or a bare job: TF resolves it when the cluster is up
        names = [d.name for d in tf.config.list_logical_devices()]
        want = f"{spec.device_type.upper()}:{spec.device_index or 0}"
        if not any(n.endswith(want) for n in names):
            raise ValueError(f"backend 'tf': device {device!r} does not exist here; logical devices: {names}")

    def input_spec(self, space: Space) -> Any:
        if isinstance(space, Dict):
            return {k: self.input_spec(v) for k, v in space.items()}
        if isinstance(space, Tuple):
            return tuple(self.input_spec(v) for v in space)
        return tf.TensorSpec(space.full_shape(), tf.as_dtype(space.dtype))

    def compile_api(self, name: str, fn: Callable, arg_spaces: dict[str, Space], gradients: bool = False) -> Callable:
        signature = [self.input_spec(s) for s in arg_spaces.values()]
        if gradients:
            fn = self.ops.recording(fn)
        tf_fn = tf.function(fn, input_signature=signature, autograph=False, jit_compile=self.jit_compile,
                            reduce_retracing=False)
        tf_fn.get_concrete_function()  # trace now: the build pays for op creation, not the first call
        return tf_fn

    def execution_callable(self, compiled: Callable) -> Callable:
        # A tf.function with a full input signature has exactly one concrete function, traced when it was
        # compiled. Calling that directly skips the Function's per-call work (binding the arguments to the
        # signature, looking up the trace cache, converting NumPy leaves against it): about 65 us of the ~105 us
        # a call of a small network takes here (reports/overhead/report.md). It takes the same (nested) NumPy or tensor
        # arguments and gives the same outputs. `api_function` still hands out the tf.function itself.
        if isinstance(compiled, tf.types.experimental.PolymorphicFunction) and compiled.input_signature is not None:
            return compiled.get_concrete_function()
        return compiled

    def to_device(self, value: Any, device: str | None = None) -> Any:
        target = device or ("/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0")

        def move(leaf: Any) -> Any:
            with tf.device(target):
                return tf.identity(leaf)
        return map_structure(move, value)

    def reset_rng(self) -> None:
        self.ops.reset_rng()
