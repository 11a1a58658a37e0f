"""A min-bytes long-poll fetch: a consumer's fetch waits until at least 1000 bytes were
produced to the partitions it reads, or until its max wait passes, and then gets
what there is (Kafka's DelayedFetch with fetch.min.bytes / fetch.max.wait.ms).

    python examples/python/fetch.py [HOST:PORT]
        (default: $PURGATORY_TARGET, else 127.0.0.1:50051)
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from purgatory_client import AsyncPurgatoryClient, Condition, OperationState, Signal

MIN_BYTES = 1000


async def fetch(
    client: AsyncPurgatoryClient, name: str, fetch_id: str, max_wait_ms: int, produce: list[int]
) -> None:
    request = {
        "keys": ["events-0", "events-1"],
        "timeout_ms": max_wait_ms,
        "condition": Condition.sum_at_least(MIN_BYTES),
        "operation_id": fetch_id,
        "purgatory": name,
    }
    await client.try_complete_else_watch(**request)
    answer = asyncio.create_task(client.wait(**request))
    for i, size in enumerate(produce):
        message = f"m{i}:{size};".encode()
        await client.check_and_complete(
            f"events-{i % 2}", Signal(amount=size, data=message), purgatory=name
        )
    status = await answer
    got = status.result.amount_sum
    print(f"{fetch_id}: {status.state.name} with {got} bytes ({status.result.data.decode()})")
    full = status.state is OperationState.COMPLETED and got >= MIN_BYTES
    partial = status.state is OperationState.EXPIRED and got < MIN_BYTES
    if not (full if sum(produce) >= MIN_BYTES else partial):
        raise SystemExit(f"unexpected outcome: {status}")


async def main(target: str) -> None:
    async with AsyncPurgatoryClient(target) as client:
        name = f"fetch-{uuid.uuid4().hex[:8]}"
        await client.create_purgatory(name)
        try:
            # Enough data arrives: the fetch is answered as soon as it reaches min bytes.
            await fetch(client, name, "fetch-1", 10_000, [400, 300, 500])
            # Too little: the fetch is answered at its max wait with what there is.
            await fetch(client, name, "fetch-2", 500, [200])
        finally:
            await client.delete_purgatory(name)


if __name__ == "__main__":
    default = os.environ.get("PURGATORY_TARGET", "127.0.0.1:50051")
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else default))
