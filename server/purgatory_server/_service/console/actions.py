"""The console's actions, one RPC each, with the session's token: the gRPC edge checks
the permission that RPC needs (``force`` for Cancel, ForceComplete and Reschedule,
``subscribe`` for Redrive and DiscardDeadLetters). Each returns the notice shown on the
page it redirects to.

The listener has already checked the form's CSRF token before any of these runs.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from purgatory_server._service.console.refusals import BadInput
from purgatory_server._service.console.view import View

__all__ = ["cancel", "discard", "force_complete", "redrive", "reschedule"]

MAX_TIMEOUT_S = 10 * 365 * 86400


def _short(operation_id: str) -> str:
    return operation_id if len(operation_id) <= 80 else operation_id[:80] + "…"


def _operation_id(form: dict[str, str]) -> str:
    oid = form.get("operation_id", "")
    if not oid:
        raise BadInput("operation_id: required")
    return oid


async def cancel(view: View, name: str, form: dict[str, str]) -> str:
    oid = _operation_id(form)
    ended = await view.client.cancel([oid], purgatory=name)
    if not ended:
        return f"Operation {_short(oid)} had already ended."
    return f"Cancelled operation {_short(oid)} (outcome sequence {ended[0].sequence})."


async def force_complete(view: View, name: str, form: dict[str, str]) -> str:
    oid = _operation_id(form)
    result = await view.client.force_complete(oid, purgatory=name)
    if not result.completed:
        return f"Operation {_short(oid)} had already ended."
    return f"Force-completed operation {_short(oid)}."


async def reschedule(view: View, name: str, form: dict[str, str]) -> str:
    oid = _operation_id(form)
    text = form.get("timeout_s", "").strip()
    try:
        seconds = float(text)
    except ValueError:
        raise BadInput("timeout_s: expected a number of seconds") from None
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_TIMEOUT_S:
        raise BadInput(f"timeout_s: expected more than 0 and at most {MAX_TIMEOUT_S} s")
    status = await view.client.reschedule(
        oid, timeout_ms=max(1, round(seconds * 1000)), purgatory=name
    )
    due = datetime.fromtimestamp(status.due_time_ms / 1000, UTC).isoformat(timespec="milliseconds")
    return f"Operation {_short(oid)} is now due at {due} UTC."


def _sequences(form: dict[str, str]) -> list[int] | None:
    """The form's one dead letter (``sequence``), or None for all of them."""
    text = form.get("sequence", "").strip()
    if text and not text.isdigit():
        raise BadInput("sequence: expected a sequence number")
    return [int(text)] if text else None


async def redrive(view: View, name: str, group: str, form: dict[str, str]) -> str:
    redriven = await view.client.redrive(group, _sequences(form), purgatory=name)
    if not redriven:
        return "Nothing to redrive: no such dead letter (already redriven?)."
    return f"Redrove {len(redriven)} dead letter(s) to group {group}: {redriven[:20]}."


async def discard(view: View, name: str, group: str, form: dict[str, str]) -> str:
    """One dead letter (``sequence``) or, only when the form says ``all=1``, every one:
    a form naming neither is refused, never taken for "all"."""
    sequences = None if form.get("all") == "1" else _sequences(form)
    if sequences is None and form.get("all") != "1":
        raise BadInput("sequence: required (or all=1 for every dead letter)")
    discarded = await view.client.discard_dead_letters(group, sequences, purgatory=name)
    if not discarded:
        return "Nothing to discard: no such dead letter (already discarded or redriven?)."
    return f"Discarded {len(discarded)} dead letter(s) of group {group}: {discarded[:20]}."
