"""Logical CPU devices for TensorFlow: several ``/cpu:N`` on one physical CPU, for multi-device graphs."""

from __future__ import annotations

import tensorflow as tf


def logical_cpus(count: int) -> list[str]:
    """Splits the physical CPU into ``count`` logical devices (``/cpu:0`` ... ``/cpu:{count-1}``).

    TensorFlow accepts this only before its runtime starts (its first op or device query
    that initializes it). Afterwards the existing devices are kept; the names of the
    logical CPUs there are returned either way, so a caller can check it got enough.

    Logical devices share the same cores and memory: they show that a graph places and
    synchronizes its parts correctly, never that it runs faster.

    Raises:
        ValueError: for a ``count`` that is not a positive int.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"logical_cpus: count must be a positive int; got {count!r}")
    cpus = tf.config.list_physical_devices("CPU")
    try:
        if len(tf.config.get_logical_device_configuration(cpus[0]) or []) < count:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    except RuntimeError:  # the runtime is initialized already: keep what exists
        pass
    return [f"/cpu:{i}" for i in range(len(tf.config.list_logical_devices("CPU")))]
