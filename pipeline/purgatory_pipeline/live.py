"""``spark.readStream.format("purgatory-subscribe")``: Structured Streaming over ``Subscribe``.

Offsets are ``{"incarnation": id, "sequence": n}``: the purgatory's stream incarnation
(docs/service.md, "Stream incarnation") and the last subscription sequence included. A
micro-batch ``(start, end]`` is one partition that opens ``Subscribe(after_sequence=start,
incarnation=id)`` and reads exactly the events up to ``end``; Spark checkpoints the
offsets, so a restarted query resumes after the last committed sequence: nothing lost,
nothing repeated.

- A durable purgatory keeps its incarnation and sequence across a server restart, so the
  query simply goes on: while the server is down, planning and reading both retry for up
  to ``connect_timeout_s``; a read cut off mid-batch resumes after the last sequence it
  yielded.
- An in-memory purgatory gets a new incarnation when it is re-created and its sequence
  restarts at 1. Resuming by sequence alone would silently skip or mix events, so the
  change is reported: with ``on_reset=fail`` (default) the query stops with
  :class:`~purgatory_pipeline.errors.StreamResetError`; with ``on_reset=restart`` it logs a
  WARNING and goes on from the start of the new stream (rows carry ``incarnation``).
- Events no longer retained by the server (``OUT_OF_RANGE``) stop the query with
  :class:`~purgatory_pipeline.errors.StreamError` naming the gap, instead of skipping them.

Options: ``target`` (host:port, required), ``purgatory`` (default ``default``),
``starting`` (``earliest`` retained event or ``latest``), ``on_reset``, ``token`` (sent as
``authorization: Bearer``), ``connect_timeout_s`` (default 30), ``read_timeout_s`` (default
60), ``max_events_per_batch`` (default 100000).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from purgatory_pipeline.errors import StreamError, StreamResetError

log = logging.getLogger(__name__)

FORMAT = "purgatory-subscribe"
INCARNATION_HEADER = "purgatory-incarnation"

SCHEMA = (
    "purgatory STRING, incarnation STRING, sequence BIGINT, operation_id STRING, "
    "state STRING, keys ARRAY<STRING>, create_time_ms BIGINT, due_time_ms BIGINT, "
    "complete_time_ms BIGINT, wait_ms BIGINT, lateness_ms BIGINT, signal_count BIGINT, "
    "sources ARRAY<STRING>, amount_sum BIGINT"
)

_STATE_NAMES = {
    pb.OperationState.Value("OPERATION_STATE_COMPLETED"): "COMPLETED",
    pb.OperationState.Value("OPERATION_STATE_EXPIRED"): "EXPIRED",
    pb.OperationState.Value("OPERATION_STATE_FORCE_COMPLETED"): "FORCE_COMPLETED",
    pb.OperationState.Value("OPERATION_STATE_CANCELLED"): "CANCELLED",
}
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


@dataclass(frozen=True)
class Settings:
    target: str
    purgatory: str
    starting: str
    on_reset: str
    token: str
    connect_timeout_s: float
    read_timeout_s: float
    max_events: int

    @classmethod
    def from_options(cls, options: dict[str, str]) -> Settings:
        target = options.get("target", "")
        if not target:
            raise StreamError("option 'target' (host:port of the purgatory server) is required")
        on_reset = options.get("on_reset", "fail")
        if on_reset not in ("fail", "restart"):
            raise StreamError(f"option 'on_reset' must be fail or restart, not {on_reset!r}")
        starting = options.get("starting", "earliest")
        if starting not in ("earliest", "latest"):
            raise StreamError(f"option 'starting' must be earliest or latest, not {starting!r}")
        return cls(
            target=target,
            purgatory=options.get("purgatory", "default"),
            starting=starting,
            on_reset=on_reset,
            token=options.get("token", ""),
            connect_timeout_s=float(options.get("connect_timeout_s", "30")),
            read_timeout_s=float(options.get("read_timeout_s", "60")),
            max_events=int(options.get("max_events_per_batch", "100000")),
        )

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()


@dataclass
class SequenceRange(InputPartition):
    """Events ``(after, until]`` of one incarnation."""

    settings: Settings
    incarnation: str
    after: int
    until: int


def _stub(settings: Settings) -> tuple[grpc.Channel, Any]:
    channel = grpc.insecure_channel(settings.target)
    return channel, pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]


def describe(settings: Settings) -> Any:
    """``GetPurgatory`` with retries while the server is unreachable (e.g. restarting)."""
    deadline = time.monotonic() + settings.connect_timeout_s
    delay = 0.1
    while True:
        channel, stub = _stub(settings)
        try:
            return stub.GetPurgatory(
                pb.GetPurgatoryRequest(name=settings.purgatory),
                timeout=5.0,
                metadata=settings.metadata(),
            ).purgatory
        except grpc.RpcError as exc:
            code = exc.code()
            if code not in _RETRYABLE or time.monotonic() + delay > deadline:
                raise StreamError(
                    f"{settings.target}: GetPurgatory({settings.purgatory!r}) failed: "
                    f"{code.name}: {exc.details()}"
                ) from None
            log.info("server %s unreachable (%s); retrying", settings.target, code.name)
        finally:
            channel.close()
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def _row(event: Any, incarnation: str) -> tuple[Any, ...]:
    state = _STATE_NAMES.get(event.state, "UNSPECIFIED")
    complete, due = event.complete_time_ms, event.due_time_ms
    return (
        event.purgatory,
        incarnation,
        event.sequence,
        event.operation_id,
        state,
        list(event.keys),
        event.create_time_ms,
        due,
        complete,
        complete - event.create_time_ms,
        complete - due if state == "EXPIRED" else None,
        event.result.signal_count,
        list(event.result.sources),
        event.result.amount_sum,
    )


def read_range(part: SequenceRange) -> Iterator[tuple[Any, ...]]:
    """The events ``(after, until]``, in order, each exactly once (worker side).

    A server that goes away mid-read (a restart: ``UNAVAILABLE``, or the stream ending
    before ``until``) is waited for as planning waits, for up to ``connect_timeout_s``
    without progress, and the read resumes after the last sequence already yielded: the
    durable purgatory kept its incarnation and sequence, so nothing is lost or repeated.
    """
    settings = part.settings
    expected = part.after + 1
    give_up: float | None = None
    delay = 0.1
    while True:
        request = pb.SubscribeRequest(
            purgatory=settings.purgatory,
            after_sequence=expected - 1,
            incarnation=part.incarnation,
        )
        channel, stub = _stub(settings)
        call = stub.Subscribe(
            request, timeout=settings.read_timeout_s, metadata=settings.metadata()
        )
        why = "the stream ended"
        try:
            for event in call:
                if event.sequence != expected:
                    raise StreamError(
                        f"purgatory {settings.purgatory!r}: expected sequence {expected}, "
                        f"got {event.sequence}"
                    )
                yield _row(event, part.incarnation)
                give_up, delay = None, 0.1  # progress: a later outage gets the full wait
                if expected >= part.until:
                    return
                expected += 1
        except grpc.RpcError as exc:
            if exc.code() not in _RETRYABLE:
                raise _stream_error(settings, part.incarnation, exc) from None
            why = f"{exc.code().name}: {exc.details()}"
        finally:
            call.cancel()
            channel.close()
        now = time.monotonic()
        give_up = now + settings.connect_timeout_s if give_up is None else give_up
        if now + delay > give_up:
            raise StreamError(
                f"{settings.target}: Subscribe stopped after sequence {expected - 1} of "
                f"{part.until} and the server did not come back within "
                f"{settings.connect_timeout_s:g} s ({why})"
            )
        log.info("Subscribe interrupted after sequence %d (%s); resuming", expected - 1, why)
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def _stream_error(settings: Settings, incarnation: str, exc: Any) -> Exception:
    code = exc.code()
    if code is grpc.StatusCode.FAILED_PRECONDITION:
        current = dict(exc.trailing_metadata() or ()).get(INCARNATION_HEADER, "")
        return StreamResetError(settings.purgatory, incarnation, current)
    if code is grpc.StatusCode.OUT_OF_RANGE:
        return StreamError(
            f"purgatory {settings.purgatory!r}: events were no longer retained by the server "
            f"(raise its retained_events): {exc.details()}"
        )
    return StreamError(f"{settings.target}: Subscribe failed: {code.name}: {exc.details()}")


class SubscribeStreamReader(DataSourceStreamReader):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def initialOffset(self) -> dict[str, Any]:
        info = describe(self.settings)
        if self.settings.starting == "latest":
            sequence = info.last_sequence
        else:  # earliest retained: everything after oldest - 1
            sequence = max(info.oldest_sequence - 1, 0) if info.oldest_sequence else 0
        return {"incarnation": info.incarnation, "sequence": int(sequence)}

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        info = describe(self.settings)
        current = {"incarnation": info.incarnation, "sequence": int(info.last_sequence)}
        if start is None:
            return current
        if start["incarnation"] and info.incarnation != start["incarnation"]:
            if self.settings.on_reset == "fail":
                raise StreamResetError(
                    self.settings.purgatory, start["incarnation"], info.incarnation
                )
            log.warning(
                "purgatory %r: stream incarnation changed from %s to %s; "
                "continuing from the start of the new stream (on_reset=restart)",
                self.settings.purgatory,
                start["incarnation"],
                info.incarnation,
            )
            start = {"incarnation": info.incarnation, "sequence": 0}
        end = min(current["sequence"], start["sequence"] + self.settings.max_events)
        return {"incarnation": info.incarnation, "sequence": max(end, start["sequence"])}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        after = start["sequence"] if start["incarnation"] == end["incarnation"] else 0
        if end["sequence"] <= after:
            return []
        return [SequenceRange(self.settings, end["incarnation"], after, end["sequence"])]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, SequenceRange)
        yield from read_range(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the server retains events, Spark's checkpoint holds the offset."""


class SubscribeDataSource(DataSource):
    """``spark.readStream.format("purgatory-subscribe").option("target", HOST_PORT).load()``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return SubscribeStreamReader(Settings.from_options(dict(self.options)))
