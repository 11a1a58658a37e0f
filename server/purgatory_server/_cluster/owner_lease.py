"""The owner lease of one replicated purgatory: a key in a NATS KV bucket with a TTL.

docs/scale-out.md, "Ownership, epochs and fencing". The bucket's TTL is ``lease_ms``: a
key not rewritten for that long disappears, and then ``create`` (compare-and-set on
"absent") succeeds for exactly one candidate. The owner rewrites its key every ``lease_ms
/ 3`` with a compare-and-set on the revision it last wrote, so a renewal after someone
else acquired fails instead of stealing the key back. The **epoch** is the revision at
which the key was created: it grows with every change of owner and goes into every journal
message.

Validity is measured on this process's monotonic clock from the moment the last
*successful* renewal was **sent** (not answered), minus a margin for clock-rate drift:
a new owner can acquire no earlier than ``lease_ms`` after that write reached the bucket,
which is after it was sent, so while ``valid()`` holds nobody else holds the lease (as
long as clock rates differ by less than the margin). Safety of the journal does not rest
on this (the append fence does); it keeps a paused owner from answering reads.

Thread-safety: loop-confined.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

from nats.js.errors import KeyWrongLastSequenceError

__all__ = ["LeaseValue", "OwnerLease"]

MARGIN = 0.10  # fraction of the lease kept back for clock-rate drift


@dataclass(frozen=True, slots=True)
class LeaseValue:
    """What the lease key holds: who owns the purgatory and where clients reach it."""

    server_id: str
    address: str

    def encode(self) -> bytes:
        return json.dumps({"server_id": self.server_id, "address": self.address}).encode()

    @staticmethod
    def decode(raw: bytes | None) -> LeaseValue | None:
        try:
            data = json.loads(raw or b"")
            return LeaseValue(str(data["server_id"]), str(data["address"]))
        except (ValueError, KeyError, TypeError):
            return None


class OwnerLease:
    """Acquire, renew and release one key (see module docstring)."""

    def __init__(self, kv: Any, key: str, value: LeaseValue, lease_s: float) -> None:
        self._kv = kv
        self.key = key
        self.value = value
        self.lease_s = lease_s
        self.epoch = 0
        self._revision = 0
        self._valid_until = 0.0

    def valid(self) -> bool:
        return self.epoch != 0 and time.monotonic() < self._valid_until

    def _granted(self, sent: float, revision: int) -> None:
        self._revision = revision
        self._valid_until = sent + self.lease_s * (1.0 - MARGIN)

    async def try_acquire(self) -> bool:
        """Create the key if it is absent; True if this server now owns it."""
        sent = time.monotonic()
        try:
            revision = await self._kv.create(self.key, self.value.encode())
        except KeyWrongLastSequenceError:
            return False
        self.epoch = int(revision)
        self._granted(sent, int(revision))
        return True

    async def renew(self) -> bool:
        """Rewrite the key; False if another server holds it now (ownership lost)."""
        sent = time.monotonic()
        try:
            revision = await self._kv.update(self.key, self.value.encode(), last=self._revision)
        except KeyWrongLastSequenceError:
            self._valid_until = 0.0
            return False
        self._granted(sent, int(revision))
        return True

    async def release(self) -> None:
        """Delete the key if it is still ours, so a standby acquires without waiting."""
        self._valid_until = 0.0
        if self._revision:
            with contextlib.suppress(KeyWrongLastSequenceError):
                await self._kv.delete(self.key, last=self._revision)
