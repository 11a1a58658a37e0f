"""N acks from distinct replicas: a produce request is answered once 3 different replicas
have acknowledged it (Kafka's DelayedProduce with acks=all). A replica that acks twice
counts once.

    python examples/python/acks.py [HOST:PORT]
        (default: $PURGATORY_TARGET, else 127.0.0.1:50051)
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from purgatory_client import AsyncPurgatoryClient, Condition, OperationState, Signal


async def main(target: str) -> None:
    async with AsyncPurgatoryClient(target) as client:
        name = f"produce-{uuid.uuid4().hex[:8]}"
        await client.create_purgatory(name)
        try:
            key = "orders-0@42"  # partition orders-0, offset 42
            request = {
                "keys": [key],
                "timeout_ms": 5_000,
                "condition": Condition.min_signals(3, distinct_sources=True),
                "operation_id": "produce-orders-0-42",
                "purgatory": name,
            }
            # Register first (so every ack from now on counts), then long-poll the same id:
            # a re-send of a known id waits on that operation instead of adding another.
            await client.try_complete_else_watch(**request)
            answer = asyncio.create_task(client.wait(**request))
            for replica in ("broker-1", "broker-2", "broker-2", "broker-3"):
                completed = await client.check_and_complete(
                    key, Signal(source=replica), purgatory=name
                )
                print(f"ack from {replica}: completed {completed} operation(s)")
            status = await answer
            print(f"produce answered: {status.state.name}, acked by {list(status.result.sources)}")
            if status.state is not OperationState.COMPLETED or status.result.signal_count != 3:
                raise SystemExit(f"unexpected outcome: {status}")
        finally:
            await client.delete_purgatory(name)


if __name__ == "__main__":
    default = os.environ.get("PURGATORY_TARGET", "127.0.0.1:50051")
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else default))
