"""A subscription that survives its consumer's restart: read outcomes, remember the last
sequence processed, and later resume after it; the server replays exactly the retained
events after that sequence (then live), so nothing is missed or processed twice. While it
runs the client also resumes by itself after a dropped stream.

    python examples/python/subscription.py [HOST:PORT]
        (default: $PURGATORY_TARGET, else 127.0.0.1:50051)
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncGenerator, AsyncIterator

from purgatory_client import AsyncPurgatoryClient, Event, OperationState


async def main(target: str) -> None:
    async with AsyncPurgatoryClient(target) as client:
        name = f"dashboard-{uuid.uuid4().hex[:8]}"
        await client.create_purgatory(name)
        try:
            for i in range(6):  # six outcomes: even ones complete, odd ones expire
                if i % 2 == 0:
                    await client.try_complete_else_watch(
                        [f"job-{i}"], 60_000, operation_id=f"job-{i}", purgatory=name
                    )
                    await client.check_and_complete(f"job-{i}", purgatory=name)
                else:
                    await client.wait([f"job-{i}"], 50, operation_id=f"job-{i}", purgatory=name)

            seen: list[int] = []
            stream = client.subscribe(purgatory=name, after_sequence=0)
            async for event in stream:
                print(f"#{event.sequence} {event.operation_id} {event.state.name}")
                seen.append(event.sequence)
                if len(seen) == 3:
                    break  # the consumer stops here; it stored seen[-1]
            await stream.aclose()

            resumed = client.subscribe(purgatory=name, after_sequence=seen[-1])
            async for event in resumed:
                print(f"#{event.sequence} {event.operation_id} {event.state.name} (resumed)")
                seen.append(event.sequence)
                if len(seen) == 6:
                    break
            await resumed.aclose()

            expired = client.subscribe(
                purgatory=name, after_sequence=0, states=[OperationState.EXPIRED]
            )
            only = [event.operation_id async for event in _first(expired, 3)]
            print(f"expired only: {only}")
            if seen != [1, 2, 3, 4, 5, 6] or only != ["job-1", "job-3", "job-5"]:
                raise SystemExit(f"unexpected: {seen} {only}")
        finally:
            await client.delete_purgatory(name)


async def _first(stream: AsyncGenerator[Event, None], n: int) -> AsyncIterator[Event]:
    async for event in stream:
        yield event
        n -= 1
        if n == 0:
            break
    await stream.aclose()


if __name__ == "__main__":
    default = os.environ.get("PURGATORY_TARGET", "127.0.0.1:50051")
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else default))
