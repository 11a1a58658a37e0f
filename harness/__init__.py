"""Infrastructure shared by the tests and the benchmarks; never shipped.

Neither ``tests/`` nor ``bench/`` is the other's library (benchmarks are not tests, and a
test must not depend on a benchmark), so what both need lives here, beside them. The
package is not in pyproject's package list, so no wheel carries it, and .dockerignore keeps
it out of the image's build context.

Map:

- :mod:`harness.server`: :class:`~harness.server.ServerProcess`, one server process on
  loopback (``python -m purgatory_server`` by default) that binds port 0 and reports the
  port through ``--port-file``; bounded start-up wait, SIGTERM-then-SIGKILL stop, its log
  kept in a file and quoted when it fails; restart on the same port; ``/proc`` readings
  (:func:`~harness.server.rss_bytes`, :func:`~harness.server.cpu_seconds`) for the
  benchmarks; :func:`~harness.server.serving` starts several at once
  and stops them all. :func:`~harness.server.free_port` only for programs that
  cannot report a port they bound (redis-server).
- :mod:`harness.tcp_proxy`: :class:`~harness.tcp_proxy.Blackhole`, a loopback TCP proxy
  that can be cut silently (a network partition between a server and NATS).
"""

from harness.server import (
    PURGATORY_SERVER,
    ServerError,
    ServerProcess,
    cpu_seconds,
    free_port,
    rss_bytes,
    serving,
)

__all__ = [
    "PURGATORY_SERVER",
    "ServerError",
    "ServerProcess",
    "cpu_seconds",
    "free_port",
    "rss_bytes",
    "serving",
]
