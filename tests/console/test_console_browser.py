"""The operator's console driven in a real headless Chromium against a real server.

One server (tokens on, console on 127.0.0.1:0) and one browser serve the whole module;
each test makes its own operations (ids unique to it). Screenshots of each page at
1280x800 go to test-artifacts/console/ (docs/console.md shows them).
"""

from __future__ import annotations

import concurrent.futures
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from purgatory_client import OperationState, PurgatoryClient
from purgatory_server._service.config.auth import parse_auth
from purgatory_server._service.config.server_config import ConfigError

from tests.service.helpers import TEST_CONFIG, ServerThread

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (the dev extra installs it)"
)
expect = sync_api.expect

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
ADMIN = "console-admin-token"
READER = "console-reader-token"  # watch + subscribe: may look and redrive, not cancel
WAIT_MS = 10_000
VIEWPORT = {"width": 1280, "height": 800}


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium is not installed (Debian package 'chromium'; make test)")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    auth = parse_auth(
        {
            "tokens": [
                {"name": "ops", "token": ADMIN, "permissions": ["admin"]},
                {"name": "viewer", "token": READER, "permissions": ["watch", "subscribe"]},
            ]
        },
        {},
    )
    limits = replace(TEST_CONFIG.limits, max_operation_id_length=256)
    config = replace(TEST_CONFIG, console_listen="127.0.0.1:0", auth=auth, limits=limits)
    with ServerThread(config) as st:
        yield st


@pytest.fixture(scope="module")
def base(server: ServerThread) -> str:
    assert server.server is not None and server.server.console is not None
    return f"http://127.0.0.1:{server.server.console.port}"


@pytest.fixture(scope="module")
def client(server: ServerThread) -> Iterator[PurgatoryClient]:
    with PurgatoryClient(server.target, token=ADMIN, trust_env=False, timeout=10) as c:
        yield c


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def _signed_in(browser: Any, base: str, token: str) -> Any:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(base + "/")
    expect(page).to_have_url(base + "/login")
    page.fill("input[name=token]", token)
    page.click("form.login button")
    expect(page).to_have_url(base + "/")
    return page


@pytest.fixture(scope="module")
def page(browser: Any, base: str) -> Iterator[Any]:
    p = _signed_in(browser, base, ADMIN)
    yield p
    p.context.close()


@pytest.fixture(scope="module")
def reader_page(browser: Any, base: str) -> Iterator[Any]:
    p = _signed_in(browser, base, READER)
    yield p
    p.context.close()


def _shot(page: Any, name: str) -> None:
    """A screenshot for review, after checking nothing overflows the 1280 px width."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= VIEWPORT["width"], f"{name}: the page is {width} px wide"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def _accept_next_dialog(page: Any) -> list[str]:
    asked: list[str] = []

    def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    return asked


def _row(page: Any, operation_id: str) -> Any:
    return page.locator("table.operations tbody tr").filter(
        has=page.locator("code.opid", has_text=operation_id)
    )


def _wait_for(predicate: Any, what: str, timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# ---------------------------------------------------------------------------- pages
def test_sign_in_shows_the_overview_with_every_purgatory(page: Any, base: str) -> None:
    page.goto(base + "/")
    row = page.locator("table.overview tbody tr", has_text="default")
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(2)).to_contain_text("/s")  # rates carry their unit
    expect(page.locator("img.chart")).to_have_count(2)
    # The charts are served and drawn (an <img> of a broken SVG has no natural width).
    page.wait_for_function(
        "[...document.querySelectorAll('img.chart')].every(i => i.complete && i.naturalWidth)"
    )
    _shot(page, "overview-first")


def test_without_a_session_pages_send_to_sign_in(browser: Any, base: str) -> None:
    context = browser.new_context()
    try:
        anonymous = context.new_page()
        anonymous.goto(base + "/p/default")
        expect(anonymous).to_have_url(base + "/login")
        anonymous.fill("input[name=token]", "not-a-token")
        anonymous.click("form.login button")
        expect(anonymous.locator(".notice")).to_have_text("That token is not valid.")
        cookie = next(c for c in context.cookies() if c["name"] == "purgatory_console")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    finally:
        context.close()


def test_cancel_one_and_see_it_end(page: Any, base: str, client: PurgatoryClient) -> None:
    client.try_complete_else_watch(["cancel-key"], 60_000, operation_id="cancel-me")
    client.try_complete_else_watch(["cancel-key"], 60_000, operation_id="cancel-keep")
    page.goto(base + "/p/default?prefix=cancel-")
    expect(page.locator("table.operations tbody tr")).to_have_count(2)
    _shot(page, "purgatory")
    asked = _accept_next_dialog(page)
    _row(page, "cancel-me").locator("form.cancel button").click()
    expect(page.locator(".notice")).to_contain_text("Cancelled operation cancel-me")
    assert asked == ["Cancel operation cancel-me?"]
    expect(_row(page, "cancel-me")).to_have_count(0)
    ended = page.locator("table.last-outcomes tbody tr").first  # newest first
    expect(ended).to_contain_text("cancel-me")
    expect(ended).to_contain_text("cancelled")
    expect(_row(page, "cancel-keep")).to_have_count(1)
    assert client.get_operation("cancel-me").state is OperationState.CANCELLED
    assert client.get_operation("cancel-keep").state is OperationState.WATCHING


def test_dismissing_the_confirmation_does_nothing(
    page: Any, base: str, client: PurgatoryClient
) -> None:
    client.try_complete_else_watch(["k"], 60_000, operation_id="not-forced")
    page.goto(base + "/p/default?prefix=not-forced")
    page.once("dialog", lambda dialog: dialog.dismiss())
    _row(page, "not-forced").locator("form.force button").click()
    expect(_row(page, "not-forced")).to_have_count(1)
    assert client.get_operation("not-forced").state is OperationState.WATCHING


def test_force_complete(page: Any, base: str, client: PurgatoryClient) -> None:
    client.try_complete_else_watch(["k"], 60_000, operation_id="force-me")
    page.goto(base + "/p/default?prefix=force-me")
    _accept_next_dialog(page)
    _row(page, "force-me").locator("form.force button").click()
    expect(page.locator(".notice")).to_contain_text("Force-completed operation force-me")
    assert client.get_operation("force-me").state is OperationState.FORCE_COMPLETED


def test_reschedule_and_see_the_new_due_time(page: Any, base: str, client: PurgatoryClient) -> None:
    before = client.try_complete_else_watch(["k"], 30_000, operation_id="move-me")
    page.goto(base + "/p/default?prefix=move-me")
    row = _row(page, "move-me")
    row.locator("input[name=timeout_s]").fill("500")
    _accept_next_dialog(page)
    sent = time.time()
    row.locator("form.reschedule button").click()
    expect(page.locator(".notice")).to_contain_text("Operation move-me is now due at")
    after = client.get_operation("move-me")
    assert after.due_time_ms > before.due_time_ms
    assert abs(after.due_time_ms / 1000 - (sent + 500)) < 30
    # The page shows the new due time (about 500 s from now, not 30 s).
    due = _row(page, "move-me").locator(".due")
    expect(due).to_contain_text(time.strftime("%Y-%m-%d", time.gmtime(after.due_time_ms / 1000)))
    assert re.search(r"\(in (4[5-9]\d|500)\.\d s\)", due.inner_text()), due.inner_text()


def test_filters_and_paging(page: Any, base: str, client: PurgatoryClient) -> None:
    for i in range(30):
        client.try_complete_else_watch([f"page-key-{i % 2}"], 60_000, operation_id=f"page-{i:02}")
    page.goto(base + "/p/default?prefix=page-&size=25")
    expect(page.locator("table.operations tbody tr")).to_have_count(25)
    page.click("a.next")
    expect(page.locator("table.operations tbody tr")).to_have_count(5)
    expect(page.locator("table.operations tbody tr").first).to_contain_text("page-25")
    page.goto(base + "/p/default")
    page.fill("input[name=key]", "page-key-1")
    page.fill("input[name=prefix]", "page-")
    page.click("form.filters button")
    expect(page.locator("table.operations tbody tr")).to_have_count(15)
    page.goto(base + "/p/default?due_after=not-a-time")
    expect(page.locator(".problem")).to_contain_text("due_after: expected epoch ms or an ISO")


def test_hostile_ids_are_rendered_inert(page: Any, base: str, client: PurgatoryClient) -> None:
    hostile = [
        "<script>window.__pwned=1</script>",
        "\"'><img src=x onerror=window.__pwned=2>",
        "zażółć-日本語-🙂-\u202e-rtl",
        "long-" + "W" * 240,
    ]
    for i, oid in enumerate(hostile):
        client.try_complete_else_watch([f"<b>key-{i}</b>"], 60_000, operation_id=oid)
    dialogs: list[str] = []

    def refuse(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    page.goto(base + "/p/default?state=&size=100")
    for oid in hostile:
        expect(page.locator("code.opid", has_text=oid[:40])).to_have_count(1)
        assert oid in page.locator("code.opid").all_inner_texts()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img[src=x]").count() == 0
    assert page.locator("main script").count() == 0
    expect(page.locator("td", has_text="<b>key-0</b>")).to_have_count(1)
    _shot(page, "hostile-ids")
    page.remove_listener("dialog", refuse)
    assert dialogs == []


def test_an_action_without_the_permission_is_refused(
    reader_page: Any, base: str, client: PurgatoryClient
) -> None:
    client.try_complete_else_watch(["k"], 60_000, operation_id="reader-cannot-cancel")
    reader_page.goto(base + "/p/default?prefix=reader-cannot")
    _accept_next_dialog(reader_page)
    with reader_page.expect_response(lambda r: r.request.method == "POST") as posted:
        _row(reader_page, "reader-cannot-cancel").locator("form.cancel button").click()
    assert posted.value.status == 403
    expect(reader_page.locator(".problem")).to_contain_text("PERMISSION_DENIED")
    expect(reader_page.locator(".problem")).to_contain_text("force")
    assert client.get_operation("reader-cannot-cancel").state is OperationState.WATCHING


def test_a_post_without_the_csrf_token_is_refused(
    page: Any, base: str, client: PurgatoryClient
) -> None:
    client.try_complete_else_watch(["k"], 60_000, operation_id="csrf-target")
    # The session's cookie goes along (the worst case): only the CSRF token is missing.
    refused = page.context.request.post(
        base + "/p/default/cancel", form={"operation_id": "csrf-target"}
    )
    assert refused.status == 403
    assert "CSRF" in refused.text()
    # A form posted from another origin is refused even with a token.
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    cross = page.context.request.post(
        base + "/p/default/cancel",
        form={"operation_id": "csrf-target", "csrf": csrf},
        headers={"Origin": "http://evil.example"},
    )
    assert cross.status == 403
    assert client.get_operation("csrf-target").state is OperationState.WATCHING


def test_a_form_on_another_site_cannot_act(page: Any, base: str, client: PurgatoryClient) -> None:
    """A page elsewhere posts a form to the console in the signed-in browser: refused (the
    Strict cookie stays home, the Origin is foreign, the CSRF token unknown)."""
    client.try_complete_else_watch(["k"], 60_000, operation_id="cross-site-target")
    attack = (
        f'<form id="f" method="post" action="{base}/p/default/cancel">'
        '<input name="operation_id" value="cross-site-target"></form>'
        "<script>document.getElementById('f').submit()</script>"
    )
    other = page.context.new_page()
    other.set_default_timeout(WAIT_MS)
    try:
        other.route(
            "http://evil.test/**",
            lambda route: route.fulfill(body=attack, content_type="text/html"),
        )
        with other.expect_response(lambda r: r.request.method == "POST") as posted:
            other.goto("http://evil.test/")
        assert posted.value.status == 403
    finally:
        other.close()
    assert client.get_operation("cross-site-target").state is OperationState.WATCHING


def test_live_outcomes_appear_and_resume_after_a_pause(
    page: Any, base: str, client: PurgatoryClient
) -> None:
    page.goto(base + "/p/default/live")
    expect(page.locator("#live-status")).to_contain_text("live after sequence")
    client.try_complete_else_watch(["live-key"], 60_000, operation_id="live-1")
    client.check_and_complete("live-key")
    live = page.locator("table.live tbody tr.outcome")
    expect(live.filter(has_text="live-1")).to_have_count(1)
    expect(live.filter(has_text="live-1")).to_contain_text("completed")
    _shot(page, "live")
    page.click("#pause")
    expect(page.locator("#live-status")).to_contain_text("paused")
    client.try_complete_else_watch(["live-key"], 60_000, operation_id="live-2")
    client.cancel(["live-2"])
    client.try_complete_else_watch(["live-key"], 60_000, operation_id="live-3")
    client.force_complete("live-3")
    page.click("#pause")  # resume: from the last sequence shown, nothing skipped
    expect(live.filter(has_text="live-3")).to_have_count(1)
    expect(live.filter(has_text="live-2")).to_contain_text("cancelled")
    sequences = [int(s) for s in live.locator("td:first-child").all_inner_texts()]
    assert sequences == sorted(sequences, reverse=True)
    assert len(sequences) == len(set(sequences)) == sequences[0] - sequences[-1] + 1
    page.fill("#filter", "live-2")
    expect(page.locator("tr.outcome:visible")).to_have_count(1)
    # Leaving the page ends its Subscribe stream at once (not at the next heartbeat).
    page.goto(base + "/")
    _wait_for(lambda: client.get_purgatory("default").subscribers == 0, "the stream to end")


def _outcomes(client: PurgatoryClient, purgatory: str, prefix: str, count: int) -> None:
    """``count`` outcomes at once: watched on one key, then completed by one signal."""
    for i in range(count):
        client.try_complete_else_watch(
            [prefix], 60_000, operation_id=f"{prefix}-{i}", purgatory=purgatory
        )
    assert client.check_and_complete(prefix, purgatory=purgatory) == count


def _appears(locator: Any, timeout_ms: int) -> bool:
    """Whether ``locator`` matches within ``timeout_ms`` (a bounded wait on the page)."""
    try:
        locator.first.wait_for(timeout=timeout_ms)
    except sync_api.TimeoutError:
        return False
    return True


def _gap(page: Any) -> Any:
    return page.locator("table.live tbody tr.gap")


def test_a_burst_is_shown_as_a_sample_with_the_skipped_counted(
    page: Any, base: str, client: PurgatoryClient
) -> None:
    from purgatory_server._service.console.live_stream import SAMPLE_CAP

    client.create_purgatory("burst")
    page.goto(base + "/p/burst/live")
    expect(page.locator("#live-status")).to_contain_text("live after sequence 0")
    # Two windows' worth (max_pending, 50): cut within one window or the next, however
    # the burst falls across a window's end.
    burst = 2 * SAMPLE_CAP
    _outcomes(client, "burst", "burst", burst)
    expect(page.locator("#live-status")).to_contain_text("showing a sample")
    live = page.locator("table.live tbody tr.outcome")
    # What a window relayed (one, or two if the burst straddled a window's end); the
    # rest is skipped. The "sampling" event follows the last outcome relayed.
    first = live.count()
    assert SAMPLE_CAP <= first < burst
    # Outcomes one at a time until one arrives on a later window's subscription.
    n = 0
    while not _appears(_gap(page), 300):
        assert n < 30, "no outcome was shown after the sample"
        _outcomes(client, "burst", f"after-{n}", 1)
        n += 1
    text = _gap(page).first.inner_text()
    found = re.search(r"showing a sample: (\d+) skipped between #(\d+) and #(\d+)", text)
    assert found, text
    skipped, after, shown = map(int, found.groups())
    assert after == first and skipped == shown - after - 1 >= burst - first
    expect(live.locator("td:first-child", has_text=re.compile(f"^{shown}$"))).to_have_count(1)
    _shot(page, "live-sample")
    # Slower than the cap again: every outcome is shown, and the page says so.
    again = page.locator("tr.gap", has_text="every outcome shown again")
    while not _appears(again, 700):
        assert n < 60, "the stream did not become gap-free again"
        _outcomes(client, "burst", f"after-{n}", 1)
        n += 1
    _outcomes(client, "burst", "calm", 1)
    expect(live.filter(has_text="calm-0")).to_have_count(1)
    expect(page.locator("#live-status")).to_contain_text("live: last sequence")


def test_a_resume_the_window_no_longer_holds_jumps_to_now_and_says_so(
    page: Any, base: str, client: PurgatoryClient
) -> None:
    client.create_purgatory("gone")  # retains the last 50 outcomes
    page.goto(base + "/p/gone/live")
    expect(page.locator("#live-status")).to_contain_text("live after sequence 0")
    _outcomes(client, "gone", "first", 1)
    live = page.locator("table.live tbody tr.outcome")
    expect(live.filter(has_text="first-0")).to_have_count(1)
    page.click("#pause")
    expect(page.locator("#live-status")).to_contain_text("paused after sequence 1")
    for batch in range(3):  # 60 more: #2 has left the window of 50
        _outcomes(client, "gone", f"missed{batch}", 20)
    page.click("#pause")
    expect(_gap(page).first).to_contain_text(
        "could not resume after #1: the resume point is no longer retained"
    )
    expect(page.locator("#live-status")).to_contain_text("live from now")
    _outcomes(client, "gone", "later", 1)
    expect(live.filter(has_text="later-0")).to_have_count(1)
    expect(_gap(page).first).to_contain_text("showing a sample: 60 skipped between #1 and #62")


def test_redrive_a_dead_letter_and_see_it_delivered(
    page: Any, base: str, client: PurgatoryClient
) -> None:
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        member = client.join_group("console-billing", visibility_timeout_ms=200, max_attempts=1)
        client.try_complete_else_watch(["bill"], 5, operation_id="bill-1")
        first = pool.submit(next, iter(member)).result(10)  # leased, never acked
        assert first.operation_id == "bill-1"
        member.close()
        _wait_for(lambda: client.list_dead_letters("console-billing").dead_letters, "a dead letter")
        page.goto(base + "/p/default/groups")
        dead = page.locator("table.dead-letters tbody tr", has_text="bill-1")
        expect(dead).to_have_count(1)
        expect(page.locator("table.groups tbody tr", has_text="console-billing")).to_have_count(1)
        client.upsert_schedule("console-hourly", every_ms=3_600_000, keys=["tick"])
        page.goto(base + "/p/default/groups")
        expect(page.locator("table.schedules tbody tr", has_text="console-hourly")).to_contain_text(
            "every 3600 s"
        )
        _shot(page, "groups")
        _accept_next_dialog(page)
        page.locator("table.dead-letters tbody tr", has_text="bill-1").locator(
            "form.redrive button"
        ).click()
        expect(page.locator(".notice")).to_contain_text("Redrove 1 dead letter(s)")
        expect(page.locator("table.dead-letters tbody tr", has_text="bill-1")).to_have_count(0)
        again = client.join_group("console-billing")
        try:
            delivered = pool.submit(next, iter(again)).result(10)
            assert (delivered.operation_id, delivered.attempt) == ("bill-1", 2)
            delivered.ack()
        finally:
            again.close()
    finally:
        client.delete_schedule("console-hourly")
        pool.shutdown(wait=False, cancel_futures=True)


def test_discard_dead_letters_and_see_them_gone(
    page: Any, base: str, client: PurgatoryClient
) -> None:
    pool = concurrent.futures.ThreadPoolExecutor(1)
    group = "console-discard"
    try:
        member = client.join_group(group, visibility_timeout_ms=200, max_attempts=1)
        for op_id in ("drop-1", "drop-2", "drop-3"):
            client.try_complete_else_watch(["drop"], 5, operation_id=op_id)
        leased = {pool.submit(next, iter(member)).result(10).operation_id for _ in range(3)}
        assert leased == {"drop-1", "drop-2", "drop-3"}  # leased, never acked
        member.close()
        _wait_for(
            lambda: len(client.list_dead_letters(group).dead_letters) == 3, "three dead letters"
        )
        page.goto(base + "/p/default/groups")
        letters = page.locator("table.dead-letters tbody tr")
        expect(letters.filter(has_text="drop-1")).to_have_count(1)
        # A discard without the CSRF token (the session's cookie going along) is refused.
        drop1 = next(
            d for d in client.list_dead_letters(group).dead_letters if d.operation_id == "drop-1"
        )
        refused = page.context.request.post(
            base + f"/p/default/groups/{group}/discard", form={"sequence": str(drop1.sequence)}
        )
        assert refused.status == 403 and "CSRF" in refused.text()
        assert len(client.list_dead_letters(group).dead_letters) == 3
        # Discard, next to Redrive, asks first; then the dead letter is gone for good.
        asked = _accept_next_dialog(page)
        letters.filter(has_text="drop-1").locator("form.discard button").click()
        expect(page.locator(".notice")).to_contain_text("Discarded 1 dead letter(s)")
        assert asked and "for good" in asked[0]
        expect(letters.filter(has_text="drop-1")).to_have_count(0)
        expect(letters.filter(has_text="drop-2")).to_have_count(1)
        remaining = [d.operation_id for d in client.list_dead_letters(group).dead_letters]
        assert remaining == ["drop-2", "drop-3"]
        # "Discard all": the rest of the group's dead letters.
        _accept_next_dialog(page)
        page.locator("h2", has_text=group).locator(
            "xpath=following-sibling::form[contains(@class, 'discard-all')][1]"
        ).locator("button").click()
        expect(page.locator(".notice")).to_contain_text("Discarded 2 dead letter(s)")
        assert client.list_dead_letters(group).dead_letters == ()
        # Nothing discarded is delivered again: a new member gets only a new outcome.
        client.try_complete_else_watch(["drop"], 5, operation_id="drop-fresh")
        again = client.join_group(group)
        try:
            delivered = pool.submit(next, iter(again)).result(10)
            assert (delivered.operation_id, delivered.attempt) == ("drop-fresh", 1)
            delivered.ack()
        finally:
            again.close()
    finally:
        client.delete_group(group)
        pool.shutdown(wait=False, cancel_futures=True)


def test_the_overview_after_activity(page: Any, base: str, client: PurgatoryClient) -> None:
    """Charts drawn from the sampled counters once the server has done some work."""
    page.goto(base + "/")
    pending = page.locator("table.overview tbody tr", has_text="default").locator("td").nth(1)
    assert int(pending.inner_text()) == client.get_purgatory("default").pending > 0
    page.wait_for_function(
        "[...document.querySelectorAll('img.chart')].every(i => i.complete && i.naturalWidth)"
    )
    _shot(page, "overview")


# ---------------------------------------------------------------------------- off
def test_the_console_is_off_by_default_and_costs_nothing() -> None:
    """Without console_listen nothing of it loads and no purgatory keeps counters."""
    code = (
        "import asyncio, sys\n"
        "from tests.service.helpers import TEST_CONFIG\n"
        "from purgatory_server._service import create_server\n"
        "async def main():\n"
        "    server, _ = await create_server('127.0.0.1:0', TEST_CONFIG)\n"
        "    try:\n"
        "        assert server.console is None\n"
        "        assert all(p.metrics is None for p in server.registry.snapshot())\n"
        "    finally:\n"
        "        await server.stop(0)\n"
        "asyncio.run(main())\n"
        "loaded = [m for m in sys.modules if m.startswith('purgatory_server._service.console')]\n"
        "assert not loaded, loaded\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=root)


def test_a_malformed_console_listen_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^console_listen must be host:port, got 'nope'$"):
        replace(TEST_CONFIG, console_listen="nope").validate()
