"""The delay queue's wake-ups: a blocked ``poll`` learns of a new, earlier head at once.

Due-ness is on MockTime; only the blocking is real time, which is the point here: a poll
that missed the offer's notify sleeps out its whole timeout (the compiled build did, see
``DelayQueue.offer``). The bounds are an order of magnitude apart (answered within 2 s,
against a 10 s or 20 s wait when the wake-up is lost), so load cannot make them flaky.
"""

from __future__ import annotations

import threading
import time

from purgatory_server import MockTime, TimerTaskList
from purgatory_server._engine.counter import TaskCounter
from purgatory_server._engine.delay_queue import DelayQueue

PROMPT_S = 2.0


def bucket_due_at(expiration_ms: int) -> TimerTaskList:
    bucket = TimerTaskList(TaskCounter())
    bucket.set_expiration(expiration_ms)
    return bucket


class BlockedPoll:
    """``queue.poll(timeout_ms)`` on its own thread, with what it returned and when."""

    def __init__(self, queue: DelayQueue, timeout_ms: int) -> None:
        self.result: TimerTaskList | None = None
        self.returned_at = 0.0
        self._queue = queue
        self._thread = threading.Thread(target=self._run, args=(timeout_ms,), daemon=True)
        self._thread.start()

    def _run(self, timeout_ms: int) -> None:
        self.result = self._queue.poll(timeout_ms)
        self.returned_at = time.monotonic()

    def wait_blocked(self) -> None:
        """Until the poller waits on the queue's condition (it then holds no lock)."""
        deadline = time.monotonic() + PROMPT_S
        while time.monotonic() < deadline:
            if self._queue._cond.acquire(blocking=False):  # free: the poller is waiting
                self._queue._cond.release()
                if self._thread.is_alive():
                    time.sleep(0.05)  # past its first due check, into the wait
                    return
            time.sleep(0.001)
        raise AssertionError("the poller never blocked")

    def join(self) -> None:
        self._thread.join(40)
        assert not self._thread.is_alive(), "poll never returned"


def assert_offer_wakes_poll(queue: DelayQueue, timeout_ms: int, bucket: TimerTaskList) -> None:
    """A ``poll(timeout_ms)`` blocked on ``queue`` returns ``bucket`` soon after its offer."""
    poller = BlockedPoll(queue, timeout_ms)
    poller.wait_blocked()
    offered_at = time.monotonic()
    queue.offer(bucket)
    poller.join()
    assert poller.result is bucket
    assert poller.returned_at - offered_at < PROMPT_S


def test_a_poll_blocked_on_an_empty_queue_wakes_for_a_due_bucket() -> None:
    queue = DelayQueue(MockTime(start_ms=1_000))
    assert_offer_wakes_poll(queue, 10_000, bucket_due_at(1_000))


def test_a_poll_sized_to_a_later_head_wakes_for_an_earlier_bucket() -> None:
    queue = DelayQueue(MockTime(start_ms=1_000))
    queue.offer(bucket_due_at(21_000))  # 20 s away on the mock clock: the wait's size
    assert_offer_wakes_poll(queue, 30_000, bucket_due_at(1_000))
    assert len(queue) == 1  # the later bucket stays queued
