"""The overview: every purgatory of the server with its figures, and the charts.

The list comes from ListPurgatories (a worker's answer includes its siblings'
purgatories, so the one address shows the whole server); outcomes per second, expiry
lateness and the budget come from this process's counters (:mod:`.figures`) and show
"—" for a purgatory another worker serves.
"""

from __future__ import annotations

from purgatory_server._service.console.figures import FINAL_STATES
from purgatory_server._service.console.markup import Html, age, bytes_text, esc, page, table, url
from purgatory_server._service.console.view import View

__all__ = ["overview"]

_SHORT = {"COMPLETED": "completed", "EXPIRED": "expired", "FORCE_COMPLETED": "forced"}


async def overview(view: View, notice: str = "") -> Html:
    infos = await view.client.list_purgatories()
    rows = []
    for info in infos:
        local = view.figures.local(info.name)
        link = Html(f'<a href="{esc(url("p", info.name))}">{esc(info.name)}</a>')
        if local is None:
            rates = ["—"] * len(FINAL_STATES)
            late, budget, owner = "—", "—", "another worker"
            durable = "yes" if info.config.durable else "no"
        else:
            rates = [f"{local.rates[s]:.1f} /s" for s in FINAL_STATES]
            late = f"≤ {age(local.lateness_p99_s)}" if local.lateness_p99_s is not None else "—"
            share = max(local.share_bytes, 1)
            budget = f"{bytes_text(local.held_bytes)} ({100 * local.held_bytes / share:.1f} %)"
            owner = "this process"
            durable = "yes" if local.durable else "no"
        rows.append(
            [
                link,
                info.pending,
                *rates,
                late,
                budget,
                durable,
                info.subscribers,
                info.last_sequence,
                owner,
            ]
        )
    heads = [
        "purgatory",
        "#pending",
        *(f"#{_SHORT.get(s.name, s.name.lower())}" for s in FINAL_STATES),
        "#lateness p99",
        "#budget held",
        "durable",
        "#subscribers",
        "#last seq",
        "owner",
    ]
    charts = Html(
        '<section class="charts">'
        '<figure><img class="chart" data-live src="/chart/pending.svg" width="600" height="200"'
        ' alt="pending operations over the last 5 minutes">'
        "<figcaption>pending operations (up to the last 5 min)</figcaption></figure>"
        '<figure><img class="chart" data-live src="/chart/outcomes.svg" width="600"'
        ' height="200" alt="outcomes per second by state over the last 5 minutes">'
        "<figcaption>outcomes per second by state (up to the last 5 min)</figcaption></figure>"
        "</section>"
    )
    body = Html(f"{table(heads, rows, 'overview')}{charts}")
    return page("Overview", body, signed_in=view.signed_in, csrf=view.csrf, notice=notice)
