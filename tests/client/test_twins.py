"""Every blocking/asyncio twin of the Python client offers the same public methods, with
the same parameters (names, kinds, defaults), inherited ones included: the clients with
all their mixins (groups, schedules, delayed messages and listing, streams, sessions), and
the hand-written twins the generated modules rely on (sessions, dispatchers, transports,
group streams, deliveries, stream readers, mailboxes). The generated modules themselves
are checked against their asyncio sources by ``make check-sync-client``."""

from __future__ import annotations

import inspect
from typing import Any

import purgatory_client as pc
import pytest
from purgatory_client import _liveness, _session_base
from purgatory_client._async_groups import AsyncGroupStream
from purgatory_client._sync_groups import GroupStream

# asyncio spells "close an async iterator" aclose (PEP 525); nothing else may differ.
ASYNC_NAMES = {"aclose": "close"}

TWINS = [
    (pc.PurgatoryClient, pc.AsyncPurgatoryClient),
    (pc.SyncSession, pc.AsyncSession),
    (pc.BatchingDispatcher, pc.AsyncBatchingDispatcher),
    (pc.SessionTransport, pc.AsyncSessionTransport),
    (GroupStream, AsyncGroupStream),
    (pc.Delivery, pc.AsyncDelivery),
    (_liveness.StreamReader, _liveness.AsyncStreamReader),
    (_session_base.Mailbox, _session_base.AsyncMailbox),
]


def public(cls: type, names: dict[str, str] | None = None) -> dict[str, Any]:
    """Public methods (inherited too) -> their parameters; properties -> "property"."""
    out: dict[str, Any] = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        key = (names or {}).get(name, name)
        if isinstance(inspect.getattr_static(cls, name), property):
            out[key] = "property"
        elif callable(member := getattr(cls, name)):
            params = inspect.signature(member).parameters.values()
            out[key] = [(p.name, p.kind, p.default) for p in params]
    return out


@pytest.mark.parametrize(
    ("blocking", "asyncio"), TWINS, ids=[blocking.__name__ for blocking, _ in TWINS]
)
def test_twins_have_the_same_public_methods(blocking: type, asyncio: type) -> None:
    mine, theirs = public(blocking), public(asyncio, ASYNC_NAMES)
    assert mine, f"{blocking.__name__} has no public methods: the comparison would be empty"
    assert mine == theirs


def test_the_client_comparison_covers_every_mixin() -> None:
    """The clients' methods come from mixins: the check above must see each one's."""
    methods = public(pc.PurgatoryClient)
    for name in (
        "wait",  # _sync (the client itself)
        "cancel",  # _sync_delayed
        "iter_operations",  # _sync_delayed (listing)
        "upsert_schedule",  # _sync_schedules
        "subscribe",  # _sync_streams
        "dispatcher",  # _sync_streams
        "session",  # _sync_session
        "join_group",  # _sync_groups
    ):
        assert name in methods
