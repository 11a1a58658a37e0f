"""Stream writes per loop turn (core/write_turns.py): a burst of writers is spread over
turns, first come first served, and the loop polls its sockets between turns.

Loop turns are counted with a callback that re-schedules itself (one run per turn), so
nothing here depends on time.
"""

from __future__ import annotations

import asyncio

from purgatory_server._service.api.write_turns import WriteTurns


class _TurnCounter:
    """Counts the loop's turns: a callback that schedules itself for the next one."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.turn = 0
        self._loop = loop
        self._handle = loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.turn += 1
        self._handle = self._loop.call_soon(self._tick)

    def stop(self) -> None:
        self._handle.cancel()


async def test_a_burst_of_writers_is_spread_over_turns_in_arrival_order() -> None:
    loop = asyncio.get_running_loop()
    turns = WriteTurns(loop, per_turn=4)
    counter = _TurnCounter(loop)
    started: list[tuple[int, int]] = []  # (writer, turn it started in)

    async def writer(n: int) -> None:
        await turns.turn()
        started.append((n, counter.turn))

    await asyncio.gather(*(writer(n) for n in range(20)))
    counter.stop()
    assert [n for n, _ in started] == list(range(20))  # first come, first served
    per_turn: dict[int, int] = {}
    for _, turn in started:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    assert max(per_turn.values()) <= 4
    assert len(per_turn) >= 5  # 20 writers, 4 a turn


async def test_the_loop_serves_other_callbacks_between_turns() -> None:
    # A request arriving while 40 writes wait runs after a few of them, not after all.
    loop = asyncio.get_running_loop()
    turns = WriteTurns(loop, per_turn=4)
    order: list[str] = []

    async def writer(n: int) -> None:
        await turns.turn()
        order.append(f"write{n}")

    writers = [asyncio.ensure_future(writer(n)) for n in range(40)]
    await asyncio.sleep(0)  # the writers have all asked for their turn
    loop.call_soon(order.append, "request")
    await asyncio.gather(*writers)
    assert order.index("request") <= 8


async def test_a_few_writers_never_wait() -> None:
    loop = asyncio.get_running_loop()
    turns = WriteTurns(loop, per_turn=4)
    counter = _TurnCounter(loop)
    for _ in range(3):  # one writer writing again and again: each start at once
        before = counter.turn
        await turns.turn()
        assert counter.turn == before
        await asyncio.sleep(0)
    counter.stop()


async def test_a_cancelled_waiter_does_not_stall_the_others() -> None:
    loop = asyncio.get_running_loop()
    turns = WriteTurns(loop, per_turn=1)
    done: list[int] = []

    async def writer(n: int) -> None:
        await turns.turn()
        done.append(n)

    tasks = [asyncio.ensure_future(writer(n)) for n in range(5)]
    await asyncio.sleep(0)
    tasks[2].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert done == [0, 1, 3, 4]
