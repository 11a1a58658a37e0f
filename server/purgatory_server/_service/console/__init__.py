"""The operator's console: a browser UI served by the server itself, off by default.

Only loaded when ``console_listen`` is set (``--console-listen HOST:PORT``); then the
server's assembly starts :func:`.listener.start_console` on its event loop. The console
is a client of its own server: every page and action is an RPC made with the signed-in
session's token to the server's gRPC port, so permissions, purgatory routing (workers,
cluster) and status codes are the API's own. Assets are in ``static/`` (no CDN, no build).

Modules:

- ``listener``: the asyncio HTTP listener, routing, sign-in, CSRF and Origin checks.
- ``http_wire``: reading one HTTP/1.1 request, writing one response, security headers.
- ``sessions``: server-side sessions behind an HttpOnly SameSite=Strict cookie, CSRF tokens.
- ``view``: what a page handler gets (the session's client, CSRF token, figures).
- ``markup``: escaping and the HTML building blocks every page uses.
- ``refusals``: failed RPCs and refused requests as HTTP statuses.
- ``figures``: the once-a-second sampler over the server's own counters.
- ``charts``: SVG charts of the samples and the lateness histogram.
- ``overview_page``: every purgatory with its figures, and the charts.
- ``purgatory_page``: one purgatory's operations (ListOperations filters and paging).
- ``actions``: cancel, force-complete, reschedule, redrive and discard.
- ``groups_page``: worker groups, dead letters (redrive, discard), schedules.
- ``live_stream``: the live outcomes page and its server-sent events over Subscribe.
- ``login_page``: the sign-in form.
"""
