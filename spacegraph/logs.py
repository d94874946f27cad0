"""TensorFlow's log noise for the `spacegraph` commands: its C++ logs off unless ``--verbose``, and its start-up
lines on stderr dropped while it imports."""

from __future__ import annotations

import os
import re
import sys

#: TF_CPP_MIN_LOG_LEVEL as the user set it (restored under --verbose); TensorFlow's C++ logs are off otherwise.
_USER_TF_LOG_LEVEL = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# NumPy's BLAS pool, before NumPy loads: env-side Atari frames resize by small matrix products, which
# ran 6x slower with the default pool on a busy 2-core machine (371 vs 2,351 steps/s).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


#: Lines TensorFlow's C++ side writes to stderr while it loads, before its log level applies: absl's
#: "before absl::InitializeLog()" notice and absl-formatted lines (I/W/E + date, pid, file:line]).
_TF_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
                       r"|[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] .*"
                       r"|To enable the following instructions: .*rebuild TensorFlow.*)$")


def set_log_level(verbose: bool) -> None:
    """TensorFlow's (and absl's) logs off, or, with ``verbose``, as the environment asks (TF's default)."""
    if verbose:
        if _USER_TF_LOG_LEVEL is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        else:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = _USER_TF_LOG_LEVEL
    else:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"


def import_tensorflow_quietly(verbose: bool = False) -> bool:
    """Imports TensorFlow now, dropping the start-up lines its C++ side writes to stderr.

    TensorFlow writes absl's notice, oneDNN's and CUDA's start-up lines straight to file
    descriptor 2 while it loads, whatever ``TF_CPP_MIN_LOG_LEVEL`` says. Unless ``verbose``,
    stderr is caught during the import and every other line is passed on. Later imports are
    free. Nothing happens when TensorFlow is imported already or not installed.

    Returns:
        Whether TensorFlow is importable.
    """
    import importlib.util

    if "tensorflow" in sys.modules:
        return True
    if importlib.util.find_spec("tensorflow") is None:
        return False
    from harness.backends.tf_import import import_tensorflow  # TensorFlow without its eager Keras import

    if verbose:
        import_tensorflow()
        return True
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            tf = import_tensorflow()
            tf.get_logger().setLevel("ERROR")
            try:
                from absl import logging as absl_logging

                absl_logging.set_verbosity(absl_logging.ERROR)
            except ImportError:
                pass
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        text = caught.read().decode(errors="replace")
    kept = [line for line in text.splitlines() if line.strip() and not _TF_NOISE.match(line)]
    if kept:
        print("\n".join(kept), file=sys.stderr)
    return True


#: The help of every command's --verbose flag.
VERBOSE_HELP = "show TensorFlow's start-up and C++ log lines (off by default)"
