"""Takeover: how a server that just acquired a purgatory's lease shuts the old owner out.

docs/scale-out.md, "Standbys". The new owner reads the subject's last sequence ``L``, waits until
its shadow has applied ``L``, then appends an empty *fence* message with
``Nats-Expected-Last-Subject-Sequence: L``. JetStream accepts it only if nothing was
appended after ``L``: if the old owner appended meanwhile, the fence is rejected, and the
new owner catches up and tries again. Once the fence is accepted, no append of the old
owner can ever succeed (its expected sequence is behind), so the shadow's state is the
purgatory's whole history. The purgatory's incarnation (its event stream's id) is kept
in the meta bucket and survives every takeover.

Thread-safety: coroutines on the server's event loop, like :mod:`.node`.
"""

from __future__ import annotations

from typing import Any

from nats.js.errors import APIError, KeyWrongLastSequenceError

from purgatory_server._cluster.layout import EPOCH_HEADER, EXPECTED_SUBJECT_SEQ, MSG_ID, token
from purgatory_server._cluster.log import WRONG_LAST_SEQUENCE
from purgatory_server._cluster.owner_lease import OwnerLease
from purgatory_server._cluster.shadow import Shadow, last_subject_sequence
from purgatory_server._service.outcomes.incarnation import new_incarnation

__all__ = ["claim_incarnation", "fence"]


async def fence(  # noqa: PLR0917 - one call site, names kept apart
    js: Any,
    name: str,
    stream: str,
    subject: str,
    shadow: Shadow,
    lease: OwnerLease,
    catch_up_s: float,
) -> int:
    """Append the fence once the shadow holds everything before it; its sequence.

    Raises RuntimeError if the lease expires first (another server may own it by then).
    """
    epoch = lease.epoch
    while True:
        if not lease.valid():
            raise RuntimeError("lease expired during takeover")
        last = await last_subject_sequence(js, stream, subject)
        await shadow.catch_up(last, catch_up_s)
        try:
            ack = await js.publish(
                subject,
                b"",
                stream=stream,
                headers={
                    EXPECTED_SUBJECT_SEQ: str(shadow.applied_sequence),
                    MSG_ID: f"{token(name)}/{epoch}/0",
                    EPOCH_HEADER: str(epoch),
                },
            )
        except APIError as exc:
            if exc.err_code != WRONG_LAST_SEQUENCE:
                raise
            continue  # the old owner appended after we read L: catch up again
        if int(ack.seq):
            return int(ack.seq)


async def claim_incarnation(meta_kv: Any, name: str) -> str:
    """The purgatory's incarnation: the one recorded, or a fresh one recorded now."""
    key = token(name)
    fresh = new_incarnation()
    try:
        await meta_kv.create(key, fresh.encode())
        return fresh
    except KeyWrongLastSequenceError:
        entry = await meta_kv.get(key)
        return bytes(entry.value or b"").decode("ascii")
