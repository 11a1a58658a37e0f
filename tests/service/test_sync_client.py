"""The blocking client against a server on its own loop thread; same API as async."""

from __future__ import annotations

import inspect
import threading
import time

import purgatory_client
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    Condition,
    NotFoundError,
    OperationSpec,
    OperationState,
    PurgatoryClient,
    Signal,
)

from tests.service.helpers import ServerThread


def test_sync_and_async_clients_have_the_same_methods() -> None:
    def public(cls: type) -> dict[str, list[str]]:
        return {
            name: list(inspect.signature(fn).parameters)
            for name, fn in vars(cls).items()
            if callable(fn) and not name.startswith("_")
        }

    assert public(PurgatoryClient) == public(AsyncPurgatoryClient)


def test_sync_round_trip(server_thread: ServerThread) -> None:
    with PurgatoryClient(server_thread.target) as client:
        result: list[purgatory_client.OperationStatus] = []
        poll = threading.Thread(
            target=lambda: result.append(
                client.wait(["x", "y"], 60_000, condition=Condition.all_keys(), timeout=10)
            )
        )
        poll.start()
        for key in ("x", "y"):
            while client.get_purgatory().pending != 1 and poll.is_alive():
                time.sleep(0.01)  # bounded by the long-poll's own 10 s deadline
            client.check_and_complete(key, Signal(amount=1))
        poll.join(10)
        assert result[0].state is OperationState.COMPLETED
        assert result[0].result.amount_sum == 2
        batch = client.batch_try_complete_else_watch(
            [OperationSpec(("b",), 60_000, operation_id="b1")], wait=False
        )
        assert batch[0].state is OperationState.WATCHING
        signalled = client.batch_check_and_complete([("b", Signal(value=3))])
        assert signalled.completed_per_signal == (1,)
        assert client.get_operation("b1").result.values == {"b": 3}
        assert client.force_complete("b1").completed is False
        with pytest.raises(NotFoundError):
            client.get_purgatory("nope")
