"""Four logical TensorFlow CPUs for the multi-device tests, made at collection, before any test starts TF."""

try:
    from harness.backends.tf.devices import logical_cpus
except ImportError:  # no TensorFlow: the TF cases fail on their own import
    pass
else:
    logical_cpus(4)
