"""`TFSession.run` (the distributed-TF transport's one entry to TensorFlow) turns TF's errors into the
transport's: a step TF's gRPC delivered twice is run again when it is idempotent and is `OutcomeUnknown`
otherwise; a closed queue is `QueueClosed`. A fake inner session raises the errors TF raises."""

from __future__ import annotations

import pytest

from harness.execution.tf_dist.transport import TFSession
from harness.execution.transport import OutcomeUnknown, QueueClosed

TWICE = "The same RunGraph request was received twice. [type.googleapis.com/tensorflow.DerivedStatus='']"


class FakeSession:
    def __init__(self, tf, failures, message=TWICE):
        self.tf, self.failures, self.message, self.calls = tf, failures, message, 0

    def run(self, fetches, feed, options=None):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.tf.errors.AbortedError(None, None, self.message)
        return "answer"


def session_with(failures, message=TWICE):
    session = TFSession("grpc://127.0.0.1:1", None)
    session._session = FakeSession(session.tf, failures, message)
    return session


def test_an_idempotent_step_delivered_twice_runs_again():
    session = session_with(failures=2)
    assert session.run("size", idempotent=True) == "answer" and session._session.calls == 3


def test_an_idempotent_step_gives_up_after_its_retries():
    session = session_with(failures=10)
    with pytest.raises(OutcomeUnknown, match="reached the learner's server twice"):
        session.run("size", idempotent=True)
    assert session._session.calls == 4


def test_a_step_that_changes_state_delivered_twice_has_an_unknown_outcome():
    session = session_with(failures=1)
    with pytest.raises(OutcomeUnknown, match="grpc://127.0.0.1:1: a step reached the learner's server twice"):
        session.run("dequeue")
    assert session._session.calls == 1   # never run again: it may have run once already


def test_other_aborts_mean_a_closed_queue():
    session = session_with(failures=1, message="FIFOQueue '_0_rollouts' is closed.")
    with pytest.raises(QueueClosed, match="is closed"):
        session.run("dequeue")
