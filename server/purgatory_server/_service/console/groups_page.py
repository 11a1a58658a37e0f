"""A purgatory's worker groups (members, ready/leased/dead counts), each group's dead
letters with **redrive** and **discard** (one, or all), and its recurring schedules with
their next firings."""

from __future__ import annotations

import time

from purgatory_server._service.console.markup import Html, esc, form, join, page, table, url, when
from purgatory_server._service.console.view import View

__all__ = ["groups_page"]

DEAD_LETTERS_SHOWN = 50


def _schedule_rule(every_ms: int, cron: str, time_zone: str) -> str:
    if cron:
        return f"cron {cron} ({time_zone or 'UTC'})"
    return f"every {every_ms / 1000:g} s"


async def groups_page(view: View, name: str, notice: str = "") -> Html:
    groups = await view.client.list_groups(purgatory=name)
    now_ms = int(time.time() * 1000)
    rows = [
        [
            g.name,
            g.members,
            g.ready,
            g.leased,
            g.dead_letters,
            g.max_attempts,
            f"{g.visibility_timeout_ms / 1000:g} s",
            g.last_sequence,
        ]
        for g in groups
    ]
    heads = [
        "group",
        "#members",
        "#ready",
        "#leased",
        "#dead",
        "#max attempts",
        "#visibility",
        "#last seq",
    ]
    sections = [table(heads, rows, "groups")]
    for g in groups:
        dead = await view.client.list_dead_letters(
            g.name, purgatory=name, page_size=DEAD_LETTERS_SHOWN
        )
        action = url("p", name, "groups", g.name, "redrive")
        discard = url("p", name, "groups", g.name, "discard")
        letters = [
            [
                d.sequence,
                Html(f"<code>{esc(d.operation_id)}</code>"),
                d.state.name.lower(),
                d.attempt,
                when(d.complete_time_ms, now_ms),
                join(
                    [
                        form(
                            action,
                            view.csrf,
                            "Redrive",
                            [("sequence", str(d.sequence))],
                            confirm=f"Redrive dead letter {d.sequence} to group {g.name}?",
                            cls="redrive",
                        ),
                        form(
                            discard,
                            view.csrf,
                            "Discard",
                            [("sequence", str(d.sequence))],
                            confirm=f"Discard dead letter {d.sequence} of group {g.name} "
                            "for good? It is never delivered again.",
                            cls="discard",
                        ),
                    ]
                ),
            ]
            for d in dead.dead_letters
        ]
        everything = (
            join(
                [
                    form(
                        action,
                        view.csrf,
                        "Redrive all",
                        confirm=f"Redrive every dead letter of {g.name}?",
                        cls="redrive-all",
                    ),
                    form(
                        discard,
                        view.csrf,
                        "Discard all",
                        [("all", "1")],
                        confirm=f"Discard every dead letter of {g.name} for good?",
                        cls="discard-all",
                    ),
                ]
            )
            if letters
            else Html("")
        )
        sections.append(
            Html(
                f'<h2>Dead letters of <span class="name">{esc(g.name)}</span></h2>{everything}'
                + table(
                    ["#sequence", "operation", "state", "#attempts", "ended", ""],
                    letters,
                    "dead-letters",
                )
            )
        )
    schedules = await view.client.list_schedules(purgatory=name)
    srows = [
        [
            Html(f"<code>{esc(s.schedule_id)}</code>"),
            _schedule_rule(s.every_ms, s.cron, s.time_zone),
            ", ".join(s.keys),
            Html(f'<span class="next-fire">{when(s.next_fire_time_ms, now_ms)}</span>'),
            Html(f"<code>{esc(s.next_operation_id)}</code>"),
        ]
        for s in schedules
    ]
    sections.append(
        Html(
            "<h2>Schedules</h2>"
            + table(
                ["schedule", "rule", "keys", "next firing", "next operation"], srows, "schedules"
            )
        )
    )
    back = Html(f'<p class="subnav"><a href="{esc(url("p", name))}">← operations</a></p>')
    return page(
        f"Groups and schedules of {name}",
        Html(back + join(sections)),
        signed_in=view.signed_in,
        csrf=view.csrf,
        notice=notice,
    )
