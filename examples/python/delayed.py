"""Delayed messages with cancel: "cancel the order if it is still unpaid after 30 minutes"
(here 1 s). Each order registers a timer (no keys: it ends only by expiry or by
ForceComplete) carrying the order id as payload. A worker subscribed to the purgatory acts
on EXPIRED outcomes; paying an order cancels its delayed message with ForceComplete, whose
outcome (FORCE_COMPLETED) the worker ignores.

    python examples/python/delayed.py [HOST:PORT]
        (default: $PURGATORY_TARGET, else 127.0.0.1:50051)
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from purgatory_client import AsyncPurgatoryClient, OperationState

DELAY_MS = 1000


async def main(target: str) -> None:
    async with AsyncPurgatoryClient(target) as client:
        name = f"orders-{uuid.uuid4().hex[:8]}"
        await client.create_purgatory(name)
        try:
            events = client.subscribe(purgatory=name, after_sequence=0)
            for order in ("order-1", "order-2", "order-3"):
                await client.try_complete_else_watch(
                    [],
                    DELAY_MS,
                    operation_id=f"unpaid-{order}",
                    payload=order.encode(),
                    purgatory=name,
                )
                print(f"{order} placed: cancelled unless paid within {DELAY_MS} ms")
            paid = await client.force_complete("unpaid-order-2", purgatory=name)
            print(f"order-2 paid: delayed cancel withdrawn ({paid.completed})")

            cancelled, withdrawn = [], []
            async for event in events:
                order = event.payload.decode()
                if event.state is OperationState.EXPIRED:
                    print(f"{order} still unpaid after {DELAY_MS} ms: cancelling it")
                    cancelled.append(order)
                elif event.state is OperationState.FORCE_COMPLETED:
                    withdrawn.append(order)
                if len(cancelled) + len(withdrawn) == 3:
                    break
            await events.aclose()
            if sorted(cancelled) != ["order-1", "order-3"] or withdrawn != ["order-2"]:
                raise SystemExit(f"unexpected: cancelled {cancelled}, withdrawn {withdrawn}")
        finally:
            await client.delete_purgatory(name)


if __name__ == "__main__":
    default = os.environ.get("PURGATORY_TARGET", "127.0.0.1:50051")
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else default))
