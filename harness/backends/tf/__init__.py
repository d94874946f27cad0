"""TensorFlow 2 backend: variables, op namespace and `tf.function` API calls.

Importing this package imports TensorFlow through `import_tensorflow`, so every module of the
backend (they all ``import tensorflow as tf``) finds it loaded without Keras.
"""

from harness.backends.tf_import import import_tensorflow

import_tensorflow()
