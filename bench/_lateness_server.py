"""``python -m purgatory_server`` with stage timestamps of every expiry (for bench.lateness_bench).

Run as ``python -m bench._lateness_server --trace FILE [--switch-interval-ms MS] -- <server
args>``. Before the server starts, it wraps four engine/service functions so that every
expiring operation leaves a monotonic timestamp at each stage of its way to the client:

- ``arm``: the server armed the operation's timer, relative to the client's send (the
  request's trip into the handler; from the key, which carries the send time);
- ``reaper``: the reaper's ``DelayQueue.poll`` returned the operation's bucket (the wake-up
  of the reaper, relative to the bucket's expiration);
- ``task``: the operation's timer task starts running (on the executor thread, or wherever
  the tree under test runs expired tasks), relative to its entry's expiration;
- ``loop``: the event loop's inbox drain picks the ended operation up (the hand-off from
  the engine's threads to the loop), relative to the same expiration.

Every stage is ``now - due`` in ms on ``time.monotonic_ns``, the clock the wheel uses (due
= the timer entry's ``expiration_ms``). ``CLOCK_MONOTONIC`` is system-wide on Linux, so the
client's timestamps are on the same timeline: the bench assigns each record to its phase
by time. Records are ``(t_ns, stage, late_ms)`` and are written to ``--trace`` as JSON when
the server exits (SIGTERM: graceful shutdown, then ``atexit``).

It patches by name and skips a function a tree does not have, so it can run ``main`` and a
``--compare-src`` tree alike. Wrapping costs a few µs per expiry (the bench expires about
200 operations a second): small next to the lateness it measures, and the same in every
tree. This is a benchmark helper; the server never imports it.
"""

from __future__ import annotations

import argparse
import atexit
import json
import sys
import time
from collections.abc import Callable
from typing import Any

_records: list[tuple[int, str, float]] = []
_due_ns: dict[int, int] = {}
_now = time.monotonic_ns


def _record(stage: str, now: int, due_ns: int) -> None:
    _records.append((now, stage, (now - due_ns) / 1e6))


def _record_arrival(operation: Any, now: int, due: int) -> None:
    """``arm``: when the server armed the timer, relative to the client's send.

    The bench's keys are ``late-<worker>-<client send ns>-<timeout ms>``; armed at = due -
    timeout (floored to the ms by the wheel, so -1 < arm <= the request's trip).
    """
    keys = getattr(operation, "_watch_keys", ())
    if len(keys) == 1 and isinstance(keys[0], str) and keys[0].startswith("late-"):
        _, _, sent, timeout_ms = keys[0].split("-")
        _records.append((now, "arm", (due - int(timeout_ms) * 1_000_000 - int(sent)) / 1e6))


def _patch_poll(cls: Any) -> None:
    orig = cls.poll

    def poll(self: Any, timeout_ms: int = 0) -> Any:
        bucket = orig(self, timeout_ms)
        if bucket is not None and timeout_ms > 0:
            # Only the blocking poll is the reaper's wake-up; poll(0) drains the rest.
            _record("reaper", _now(), bucket.expiration * 1_000_000)
        return bucket

    cls.poll = poll


def _patch_run(cls: Any, attr: str = "run") -> None:
    orig: Callable[[Any], None] = getattr(cls, attr)

    def run(self: Any) -> None:
        now = _now()
        entry = self._entry
        if entry is not None:
            due = entry.expiration_ms * 1_000_000
            _record("task", now, due)
            owner = getattr(self, "_operation", self)  # _Expiry runs for its operation
            _due_ns[id(owner)] = due
            _record_arrival(owner, now, due)
        orig(self)

    setattr(cls, attr, run)


def _patch_drain(cls: Any) -> None:
    orig = cls.drain

    def drain(self: Any) -> int:
        now = _now()
        for item in list(self._items):
            due = _due_ns.pop(id(item), None)
            if due is not None:
                _record("loop", now, due)
        return int(orig(self))

    cls.drain = drain


def install() -> None:
    from purgatory_server._engine import delay_queue

    from bench._common import first_module

    _patch_poll(delay_queue.DelayQueue)
    # This tree's layout first, then the flat _service/ of trees before the split.
    operation = first_module(
        "purgatory_server._service.core.operation", "purgatory_server._service.operation"
    )
    if operation is not None:
        _patch_run(operation.RemoteOperation)
        expiry = getattr(operation, "_Expiry", None)
        if expiry is not None:
            _patch_run(expiry)
    inbox = first_module(
        "purgatory_server._service.outcomes.inbox", "purgatory_server._service.inbox"
    )
    if inbox is not None:
        _patch_drain(inbox.Inbox)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """This wrapper's options, and the server's arguments (everything after ``--``)."""
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(
        prog="python -m bench._lateness_server",
        description=__doc__.splitlines()[0],
        epilog="Arguments after -- go to the server (python -m purgatory_server --help).",
    )
    parser.add_argument("--trace", help="write the stage records here (JSON) at exit")
    parser.add_argument(
        "--switch-interval-ms",
        type=float,
        help="force sys.setswitchinterval to MS for this run (the server cannot change it)",
    )
    return parser.parse_args(argv[:split]), argv[split + 1 :]


def main() -> int:
    own, server_args = parse_args(sys.argv[1:])
    if own.switch_interval_ms is not None:
        sys.setswitchinterval(own.switch_interval_ms / 1000.0)
        # Forced for this run: a server that sets its own interval at start-up is
        # overridden (so "the same tree at 5 ms" is measurable next to its default).
        sys.setswitchinterval = lambda _s: None  # type: ignore[assignment]
    if own.trace is not None:
        install()
        trace = own.trace

        def dump() -> None:
            with open(trace, "w") as fh:
                json.dump(_records, fh)

        atexit.register(dump)
    from purgatory_server.__main__ import main as server_main

    return server_main(server_args)


if __name__ == "__main__":
    sys.exit(main())
