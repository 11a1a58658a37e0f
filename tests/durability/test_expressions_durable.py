"""A durable purgatory's expressions, attributes and match operations across SIGKILL:
the restarted server rebuilds them from the journal (the signals that counted, the ones
that did not), keeps judging new signals the same way, and remembers which signal
matched an outcome."""

from __future__ import annotations

from pathlib import Path

from purgatory_client import Condition, OperationState, PurgatoryClient, Signal

from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME

FINANCE = "signal.attributes.role == 'finance'"


def test_expressions_survive_kill_9(tmp_path: Path) -> None:
    server = DurableServer(tmp_path / "data", "always", tmp_path / "server.log")
    try:
        with PurgatoryClient(f"127.0.0.1:{server.wait_port()}", purgatory=NAME) as client:
            approvers = Condition.min_signals(2, distinct_sources=True).where(FINANCE)
            client.try_complete_else_watch(["inv"], 600_000, condition=approvers, operation_id="a")
            for invoice in (1, 2):
                paid = Condition.any_key().where(
                    "signal.attributes.approved",
                    match="invoice_id",
                    attributes={"invoice_id": invoice},
                )
                client.try_complete_else_watch(
                    ["paid"], 600_000, condition=paid, operation_id=f"paid-{invoice}"
                )
            finance = {"role": "finance"}
            assert client.check_and_complete("inv", Signal(source="ann", attributes=finance)) == 0
            sales = Signal(source="bob", attributes={"role": "sales"})
            assert client.check_and_complete("inv", sales) == 0
            unapproved = Signal(attributes={"invoice_id": 2, "approved": False})
            assert client.check_and_complete("paid", unapproved) == 0
            approved = Signal(attributes={"invoice_id": 1, "approved": True})
            assert client.check_and_complete("paid", approved) == 1
        server.kill()
        server = DurableServer(tmp_path / "data", "always", tmp_path / "server.log")
        with PurgatoryClient(f"127.0.0.1:{server.wait_port()}", purgatory=NAME) as client:
            done = client.get_operation("paid-1")
            assert done.state is OperationState.COMPLETED
            assert done.result.matched_attributes == {"invoice_id": 1, "approved": True}
            assert client.get_operation("paid-2").state is OperationState.WATCHING
            progress = client.get_operation("a")
            assert progress.state is OperationState.WATCHING
            assert progress.result.sources == ("ann",)  # bob's signal did not count
            # A re-send with the same expression is the same operation (idempotent).
            again = client.try_complete_else_watch(
                ["inv"],
                600_000,
                condition=Condition.min_signals(2, distinct_sources=True).where(FINANCE),
                operation_id="a",
            )
            assert not again.created
            # The rebuilt match index and filter judge new signals as before.
            assert client.check_and_complete("paid", Signal(attributes={"invoice_id": 2})) == 0
            paid = Signal(attributes={"invoice_id": 2, "approved": True})
            assert client.check_and_complete("paid", paid) == 1
            assert client.check_and_complete("inv", Signal(source="bob", attributes=finance)) == 1
            assert client.get_operation("a").result.sources == ("ann", "bob")
    finally:
        server.stop()
