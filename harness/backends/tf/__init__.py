"""TensorFlow 2 backend: variables, op namespace and `tf.function` API calls."""
