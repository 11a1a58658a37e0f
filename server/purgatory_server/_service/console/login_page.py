"""The sign-in page: the token is entered once and kept server-side (:mod:`.sessions`)."""

from __future__ import annotations

from purgatory_server._service.console.markup import Html, esc, page

__all__ = ["login_page"]


def login_page(csrf: str, problem: str = "") -> Html:
    body = Html(
        '<form method="post" action="/login" class="login">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        '<label>Token <input type="password" name="token" autocomplete="current-password" '
        "required autofocus></label>"
        '<button type="submit">Sign in</button></form>'
        '<p class="hint">The token is one of the server\'s <code>[[auth.tokens]]</code>; '
        "each action needs the permission its RPC needs.</p>"
    )
    return page("Sign in", body, notice=problem)
