"""One purgatory: its operations from ListOperations (filters, cursor paging), the
actions on each (cancel, reschedule, force-complete, each confirmed first), its last
outcomes and its expiry lateness histogram.

Filters are ListOperations' own: watched ``key``, id ``prefix``, ``state`` (pending, or
one final state for recently ended operations), due time ``due_after <= due <
due_before`` (epoch ms, or ISO-8601, UTC unless it names a zone). Keys and condition are
shown where this process serves the purgatory (the listing carries neither). The last
outcomes are read from the purgatory's retained window with Subscribe.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import aclosing
from datetime import UTC, datetime

from purgatory_client import Event, OperationState, OperationStatus
from purgatory_client.errors import PurgatoryError

from purgatory_server._service.console.markup import (
    Html,
    age,
    bytes_text,
    esc,
    form,
    join,
    page,
    table,
    url,
    when,
)
from purgatory_server._service.console.refusals import BadInput
from purgatory_server._service.console.view import View
from purgatory_server._service.model.conditions import ConditionSpec

__all__ = ["FINAL", "parse_due", "purgatory_page"]

FINAL = ("COMPLETED", "EXPIRED", "FORCE_COMPLETED", "CANCELLED")
PAGE_SIZES = ("25", "50", "100")
LAST_SHOWN = 20
LAST_WAIT_S = 2.0


def parse_due(field: str, text: str) -> int:
    """Epoch ms from ``text`` (digits: ms; else ISO-8601, UTC if no zone); 0 if empty."""
    text = text.strip()
    if not text:
        return 0
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(
            f"{field}: expected epoch ms or an ISO-8601 time, got {text[:40]!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0, int(moment.timestamp() * 1000))


def _condition(spec: ConditionSpec) -> str:
    kind = spec.kind.value
    if spec.count:
        kind += f" ≥ {spec.count}" + (" distinct sources" if spec.distinct_sources else "")
    if spec.threshold:
        kind += f" sum ≥ {spec.threshold}"
    if spec.targets or spec.default_target:
        kind += f" targets {dict(spec.targets)} default {spec.default_target}"
    gate = spec.gate
    if gate is not None:  # expressions (docs/conditions.md), shortened; escaped as text
        if gate.match:
            kind += f" match {gate.match[:60]}"
        if gate.filter:
            kind += f" if {gate.filter[:80]}"
        if gate.predicate:
            kind += f" predicate {gate.predicate[:80]}"
    return kind


def _progress(op: OperationStatus) -> str:
    r = op.result
    parts = [f"{r.signal_count} signal{'s' if r.signal_count != 1 else ''}"]
    if r.amount_sum:
        parts.append(f"sum {r.amount_sum}")
    if r.sources:
        parts.append(f"{len(r.sources)} sources")
    return ", ".join(parts)


def _filters(q: dict[str, str], name: str) -> Html:
    state = q.get("state", "")
    options = join(
        Html(f'<option value="{esc(v)}"{" selected" if v == state else ""}>{esc(label)}</option>')
        for v, label in [("", "pending"), *((s, s.lower()) for s in FINAL)]
    )
    size = q.get("size", "25")
    sizes = join(
        Html(f"<option{' selected' if s == size else ''}>{esc(s)}</option>") for s in PAGE_SIZES
    )

    def box(field: str, label: str, hint: str) -> Html:
        return Html(
            f'<label>{esc(label)} <input name="{esc(field)}" value="{esc(q.get(field, ""))}" '
            f'placeholder="{esc(hint)}"></label>'
        )

    return Html(
        f'<form method="get" action="{esc(url("p", name))}" class="filters">'
        f"{box('key', 'key', 'watched key')}{box('prefix', 'id prefix', 'order-')}"
        f'<label>state <select name="state">{options}</select></label>'
        f"{box('due_after', 'due ≥', 'ISO-8601 UTC or epoch ms')}"
        f"{box('due_before', 'due <', 'ISO-8601 UTC or epoch ms')}"
        f'<label>page <select name="size">{sizes}</select></label>'
        '<button type="submit">Filter</button></form>'
    )


def _actions(view: View, name: str, op: OperationStatus) -> Html:
    if op.state is not OperationState.WATCHING:
        return Html("")
    oid = op.operation_id
    fields = [("operation_id", oid)]
    short = oid if len(oid) <= 60 else oid[:60] + "…"
    timeout = Html(
        '<input name="timeout_s" class="short" inputmode="decimal" placeholder="s" '
        'aria-label="new timeout in seconds" required>'
    )
    return join(
        [
            form(
                url("p", name, "cancel"),
                view.csrf,
                "Cancel",
                fields,
                confirm=f"Cancel operation {short}?",
                cls="cancel",
            ),
            form(
                url("p", name, "force"),
                view.csrf,
                "Force-complete",
                fields,
                confirm=f"Force-complete operation {short}?",
                cls="force",
            ),
            form(
                url("p", name, "reschedule"),
                view.csrf,
                "Reschedule",
                fields,
                confirm=f"Move the deadline of operation {short}?",
                extra=timeout,
                cls="reschedule",
            ),
        ]
    )


async def last_outcomes(view: View, name: str, oldest: int, last: int) -> tuple[list[Event], str]:
    """The last ``LAST_SHOWN`` outcomes, read from the retained window with Subscribe
    (so they need ``subscribe``, as the live page does), and why some are missing: a
    refusal, or their not arriving within ``LAST_WAIT_S``."""
    if not last:
        return [], ""
    after = max(last - LAST_SHOWN, oldest - 1, 0)
    found: list[Event] = []
    try:
        async with asyncio.timeout(LAST_WAIT_S):
            stream = view.client.subscribe(purgatory=name, after_sequence=after)
            async with aclosing(stream) as events:  # type: ignore[type-var]
                async for event in events:
                    if not event.heartbeat:
                        found.append(event)
                    if event.sequence >= last:
                        break
    except TimeoutError:
        return found, f"only {len(found)} arrived within {LAST_WAIT_S:g} s"
    except PurgatoryError as exc:
        return found, f"{exc.code.name}: {exc.details}"
    return found, ""


async def purgatory_page(view: View, name: str, q: dict[str, str], notice: str = "") -> Html:
    info = await view.client.get_purgatory(name)
    state = q.get("state", "")
    if state and state not in FINAL:
        raise BadInput(f"state: expected one of {', '.join(FINAL)} or empty")
    size = q.get("size", "25")
    if size not in PAGE_SIZES:
        raise BadInput(f"size: expected one of {', '.join(PAGE_SIZES)}")
    listing = await view.client.list_operations(
        purgatory=name,
        key=q.get("key", ""),
        prefix=q.get("prefix", ""),
        states=[OperationState[state]] if state else [],
        due_after_ms=parse_due("due_after", q.get("due_after", "")),
        due_before_ms=parse_due("due_before", q.get("due_before", "")),
        page_token=q.get("page", ""),
        page_size=int(size),
    )
    now_ms = int(time.time() * 1000)
    rows = []
    for op in listing.operations:
        definition = view.definition(name, op.operation_id)
        keys = ", ".join(definition.keys) if definition is not None else "—"
        cond = _condition(definition.condition) if definition is not None else "—"
        rows.append(
            [
                Html(f'<code class="opid">{esc(op.operation_id)}</code>'),
                op.state.name.lower(),
                keys,
                cond,
                _progress(op),
                when(op.create_time_ms, now_ms),
                Html(f'<span class="due">{when(op.due_time_ms, now_ms)}</span>'),
                _actions(view, name, op),
            ]
        )
    heads = ["operation", "state", "keys", "condition", "progress", "created", "due", "actions"]
    paging = Html("")
    if listing.next_page_token:
        kept = {k: v for k, v in q.items() if k != "page"}
        nxt = url("p", name, **kept, page=listing.next_page_token)
        paging = Html(f'<p class="paging"><a class="next" href="{esc(nxt)}">Next page →</a></p>')
    ended, unseen = await last_outcomes(view, name, info.oldest_sequence, info.last_sequence)
    last = [
        [
            Html(f"<code>{esc(o.operation_id)}</code>"),
            o.state.name.lower(),
            o.sequence,
            when(o.complete_time_ms, now_ms),
        ]
        for o in reversed(ended)
    ]
    missing = Html(f'<p class="problem">{esc(unseen)}</p>') if unseen else Html("")
    local = view.figures.local(name)
    facts = [
        ("pending", f"{info.pending}"),
        ("watched keys", f"{info.watched_keys}"),
        ("last sequence", f"{info.last_sequence}"),
        ("durable", "yes" if info.config.durable else "no"),
        ("lateness p99", age(local.lateness_p99_s) if local else "—"),
        ("budget held", bytes_text(local.held_bytes) if local else "—"),
    ]
    summary = join(Html(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>") for k, v in facts)
    nav = Html(
        f'<p class="subnav"><a href="{esc(url("p", name, "live"))}">Live outcomes</a> · '
        f'<a href="{esc(url("p", name, "groups"))}">Worker groups and schedules</a></p>'
    )
    body = Html(
        f'{nav}<dl class="facts">{summary}</dl>{_filters(q, name)}'
        f"{table(heads, rows, 'operations')}{paging}"
        f"<h2>Last outcomes</h2>{missing}"
        f"{table(['operation', 'state', '#sequence', 'ended'], last, 'last-outcomes')}"
        f'<h2>Expiry lateness</h2><img class="chart" data-live width="600" height="200" '
        f'src="{esc(url("chart", "lateness", name))}" alt="expiry lateness histogram">'
    )
    return page(f"Purgatory {name}", body, signed_in=view.signed_in, csrf=view.csrf, notice=notice)
