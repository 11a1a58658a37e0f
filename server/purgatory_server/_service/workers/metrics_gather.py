"""One Prometheus endpoint for a server of several workers: the supervisor gathers theirs.

A scrape of ``metrics_listen`` sees the whole server, not 1/N of it: it fetches every
worker's exposition from its loopback port (in parallel, each bounded by
``FETCH_TIMEOUT_S``) and merges them, one ``# HELP``/``# TYPE`` header per family and every
sample labelled ``purgatory_worker="i"`` so workers' series never collide.
``purgatory_worker_up`` says which workers answered; a restarting worker's series are
missing from that scrape, as for a down target.

Text format 0.0.4 only (what ``prometheus_client`` serves without content negotiation);
metric names never contain ``{``, so a sample's labels start at its first ``{``.

Thread-safety: the HTTP server answers on its own threads; the worker ports are fixed at
construction, and each scrape builds its own result.
"""

from __future__ import annotations

import logging
import socket
import threading
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["MetricsGather", "merge_expositions"]

logger = logging.getLogger("purgatory_server.workers")

FETCH_TIMEOUT_S = 2.0
LABEL = "purgatory_worker"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_UP = (
    "# HELP purgatory_worker_up Whether the worker answered this scrape (1) or not (0).\n"
    "# TYPE purgatory_worker_up gauge\n"
)


def _labelled(sample: str, index: int) -> str:
    if f'{LABEL}="' in sample:  # target_info already names its worker
        return sample
    name, brace, rest = sample.partition("{")
    if brace:
        return f'{name}{{{LABEL}="{index}",{rest}'
    name, _, value = sample.partition(" ")
    return f'{name}{{{LABEL}="{index}"}} {value}'


def merge_expositions(texts: Mapping[int, str | None]) -> str:
    """Worker index -> its exposition (None: it did not answer) -> one exposition."""
    headers: dict[str, dict[str, str]] = {}  # family -> HELP/TYPE -> its line (the first)
    samples: dict[str, list[str]] = {}
    for index, text in sorted(texts.items()):
        family = ""
        for line in (text or "").splitlines():
            if line.startswith("# "):
                _, kind, name, *_ = [*line.split(" ", 3), "", ""]
                if kind in ("HELP", "TYPE"):
                    family = name
                    headers.setdefault(name, {}).setdefault(kind, line)
                    samples.setdefault(name, [])
                continue
            if line.strip() and family:
                samples[family].append(_labelled(line, index))
    out = [line for name in headers for line in (*headers[name].values(), *samples[name])]
    up = [f'purgatory_worker_up{{{LABEL}="{i}"}} {int(t is not None)}' for i, t in texts.items()]
    return "\n".join(out) + ("\n" if out else "") + _UP + "\n".join(sorted(up)) + "\n"


class MetricsGather:
    """Serves the merged exposition at http://``address``/metrics (see module docstring)."""

    def __init__(self, address: str, worker_ports: Mapping[int, int]) -> None:
        self._address = address
        self._urls = {i: f"http://127.0.0.1:{port}/metrics" for i, port in worker_ports.items()}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def scrape(self) -> str:
        with ThreadPoolExecutor(max_workers=len(self._urls)) as pool:
            texts = dict(zip(self._urls, pool.map(_fetch, self._urls.values()), strict=True))
        return merge_expositions(texts)

    def start(self) -> int:
        """Listen (OSError if the address is taken); returns the bound port."""
        host, _, port = self._address.rpartition(":")
        gather = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/", "/metrics"):
                    self.send_error(404)
                    return
                body = gather.scrape().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # a scrape every few seconds is not news

        host = host.strip("[]")
        server_class = _HTTP6Server if ":" in host else ThreadingHTTPServer
        self._server = server_class((host, int(port)), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-gather", daemon=True
        )
        self._thread.start()
        return int(self._server.server_address[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _HTTP6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6  # an IPv6 metrics_listen such as [::]:9464


def _fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:
            text: str = answer.read().decode("utf-8", errors="replace")
            return text
    except OSError as exc:  # refused, timed out, HTTP error: down or restarting, up 0
        logger.debug("metrics: %s did not answer: %s", url, exc)
        return None
