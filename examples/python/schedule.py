"""A recurring schedule: every 250 ms (a cron expression with a time zone works the same
way, e.g. cron="0 9 * * MON-FRI", time_zone="Europe/Paris"). Two producers upsert the same
schedule; the second changes nothing. Each firing is an operation with the id
"<schedule id>@<fire time ms>", delivered as an EXPIRED outcome to subscribers.

    python examples/python/schedule.py [HOST:PORT]
        (default: $PURGATORY_TARGET, else 127.0.0.1:50051)
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from purgatory_client import AsyncPurgatoryClient, OperationState

EVERY_MS = 250


async def main(target: str) -> None:
    async with AsyncPurgatoryClient(target) as client:
        name = f"jobs-{uuid.uuid4().hex[:8]}"
        await client.create_purgatory(name)
        try:
            events = client.subscribe(purgatory=name, operation_id_prefix="beat@")
            first = await client.upsert_schedule(
                "beat", every_ms=EVERY_MS, payload=b"run the job", purgatory=name
            )
            print(f"schedule created; next firing: {first.schedule.next_operation_id}")
            again = await client.upsert_schedule(
                "beat", every_ms=EVERY_MS, payload=b"run the job", purgatory=name
            )
            print(f"a second producer upserts it: changed={again.changed}")

            fired: list[int] = []
            async for event in events:
                if event.state is OperationState.EXPIRED:
                    fired.append(int(event.operation_id.rpartition("@")[2]))
                    print(f"{event.operation_id}: {event.payload.decode()}")
                if len(fired) == 3:
                    break
            await events.aclose()
            # Fire times are multiples of EVERY_MS (a firing that came too late to re-arm
            # in time would skip one grid point, never fire twice).
            on_grid = all(t % EVERY_MS == 0 for t in fired)
            if not on_grid or sorted(set(fired)) != fired or again.changed:
                raise SystemExit(f"unexpected: fire times {fired}, changed={again.changed}")
            print(f"3 firings on the {EVERY_MS} ms grid, no duplicates")
            cancelled = await client.delete_schedule("beat", purgatory=name)
            print(f"schedule deleted; {cancelled.operation_id if cancelled else 'none'} cancelled")
        finally:
            await client.delete_purgatory(name)


if __name__ == "__main__":
    default = os.environ.get("PURGATORY_TARGET", "127.0.0.1:50051")
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else default))
