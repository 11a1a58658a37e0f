"""``purgatory-server --workers 2`` as a user runs it: one address, a supervisor, two
worker processes (harness.ServerProcess, 127.0.0.1, port 0 resolved by the supervisor).

- every worker lists the whole server, and creating/deleting a purgatory through any
  worker lands on its owner;
- a client given the wrong worker's own address ends up at the owner (the redirect it
  already follows for a cluster) and remembers the route;
- kill -9 of a worker: the supervisor restarts it, its durable purgatories recover from
  their journals with every acknowledged operation, and the other worker serves on
  meanwhile;
- each worker serves its own metrics (configured port + its index), its purgatories'
  series only, and names itself in ``target_info``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from purgatory_client import PurgatoryClient, PurgatoryConfig
from purgatory_client._models import OperationState
from purgatory_client.errors import PurgatoryError
from purgatory_server._service.workers.metrics_gather import merge_expositions
from purgatory_server._service.workers.plan import WorkerPlan, max_workers

from harness import PURGATORY_SERVER, ServerProcess, free_port

NAMES = [f"p{i}" for i in range(6)]


def _owner(name: str) -> int:
    return WorkerPlan(0, "127.0.0.1", 1, (2, 3), "127.0.0.1").owner_of(name)


def _start(tmp_path: Path) -> ServerProcess:
    args = ["--workers", "2", "--durable", "--data-dir", str(tmp_path / "data")]
    for name in NAMES:
        args += ["--purgatory", name]
    server = ServerProcess(tmp_path, args, label="workers", start_timeout_s=60)
    server.start()
    server.wait_port()
    return server


def _own_ports(server: ServerProcess) -> list[int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = re.search(r"own ports (\d+), (\d+)", server.log_path.read_text())
        if found:
            return [int(found.group(1)), int(found.group(2))]
        time.sleep(0.05)
    raise AssertionError("the supervisor did not log its workers' ports")


def _worker_pids(server: ServerProcess) -> dict[int, int]:
    """Worker index -> pid, from the supervisor's children."""
    assert server.proc is not None
    sup = server.proc.pid
    children = Path(f"/proc/{sup}/task/{sup}/children").read_text().split()
    pids: dict[int, int] = {}
    for pid in map(int, children):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"--worker-index" in argv:
            pids[int(argv[argv.index(b"--worker-index") + 1])] = pid
    return pids


def _names(client: PurgatoryClient) -> list[str]:
    return [p.name for p in client.list_purgatories()]


def test_one_address_whole_server_listing_and_redirects(tmp_path: Path) -> None:
    assert {_owner(n) for n in NAMES} == {0, 1}  # both workers own some
    server = _start(tmp_path)
    own = _own_ports(server)
    clients = [PurgatoryClient(f"127.0.0.1:{p}", timeout=10) for p in own]
    shared = PurgatoryClient(f"127.0.0.1:{server.port}", timeout=10)
    try:
        for client in [*clients, shared]:
            assert _names(client) == NAMES  # each worker sees the whole server
        # The wrong worker: the call is answered by the owner, and the route is kept.
        theirs = next(n for n in NAMES if _owner(n) == 1)
        status = clients[0].try_complete_else_watch(["k"], 60_000, purgatory=theirs)
        assert status.state is OperationState.WATCHING
        assert clients[0]._router.routes == {theirs: f"127.0.0.1:{own[1]}"}
        assert clients[1].get_purgatory(theirs).pending == 1  # it is at the owner
        assert shared.check_and_complete("k", purgatory=theirs) == 1
        # Create through one worker, delete through the other: both reach the owner.
        fresh = [f"fresh-{i}" for i in range(4)]
        for name in fresh:
            shared.create_purgatory(name)
        assert {_owner(n) for n in fresh} == {0, 1}
        for client in clients:
            assert _names(client) == sorted(NAMES + fresh)
        for name in fresh:
            other = clients[1 - _owner(name)]
            other.try_complete_else_watch(["x"], 60_000, purgatory=name)
            assert other.delete_purgatory(name) == 1
        assert _names(clients[0]) == NAMES
    finally:
        for client in [*clients, shared]:
            client.close()
        assert server.stop() == 0


def _wait_serving(client: PurgatoryClient, name: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.get_purgatory(name)
            return
        except PurgatoryError:
            assert time.monotonic() < deadline, "the worker was not restarted in time"
            time.sleep(0.1)


def test_a_killed_worker_is_restarted_and_recovers_what_it_acknowledged(
    tmp_path: Path,
) -> None:
    server = _start(tmp_path)
    own = _own_ports(server)
    victim = next(n for n in NAMES if _owner(n) == 1)
    survivor = next(n for n in NAMES if _owner(n) == 0)
    shared = PurgatoryClient(f"127.0.0.1:{server.port}", timeout=10)
    direct = PurgatoryClient(f"127.0.0.1:{own[1]}", timeout=10)
    other = PurgatoryClient(f"127.0.0.1:{own[0]}", timeout=10)
    try:
        for i in range(50):  # each acknowledged (fsync always) before the next is sent
            shared.try_complete_else_watch(
                [f"k{i % 5}"], 600_000, operation_id=f"op-{i}", purgatory=victim
            )
        before = _worker_pids(server)
        os.kill(before[1], signal.SIGKILL)
        # The other worker serves on while its sibling is down and restarting.
        assert other.get_purgatory(survivor).name == survivor
        _wait_serving(direct, victim, 30)
        after = _worker_pids(server)
        assert after[1] != before[1] and after[0] == before[0]
        assert direct.get_purgatory(victim).pending == 50
        assert direct.get_operation("op-7", purgatory=victim).state is OperationState.WATCHING
        assert sum(shared.check_and_complete(f"k{j}", purgatory=victim) for j in range(5)) == 50
        assert _names(other) == NAMES
    finally:
        for client in (shared, direct, other):
            client.close()
        assert server.stop() == 0


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
    return text


def test_one_metrics_endpoint_shows_every_worker_labelled(tmp_path: Path) -> None:
    port = free_port()
    args = ["--workers", "2", "--metrics-listen", f"127.0.0.1:{port}"]
    for name in NAMES:
        args += ["--purgatory", name]
    with ServerProcess(tmp_path, args, label="metrics", start_timeout_s=60):
        text = _metrics(port)
        for index in (0, 1):
            assert re.search(rf'target_info\{{[^}}]*purgatory_worker="{index}"', text)
            assert f'purgatory_worker_up{{purgatory_worker="{index}"}} 1' in text
        held = re.findall(
            r'purgatory_memory_held_bytes\{purgatory_worker="(\d)",[^}]*purgatory_name="([^"]+)"',
            text,
        )
        # every purgatory once, labelled with the worker that owns it
        assert sorted(held, key=lambda pair: pair[1]) == [(str(_owner(n)), n) for n in NAMES]
        families = re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE)
        assert len(families) == len(set(families))  # one header per family, not per worker
        promtool = shutil.which("promtool")
        if promtool is not None:  # installed by `make test` as root (Debian 'prometheus')
            checked = subprocess.run(
                [promtool, "check", "metrics"],
                input=text,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_worker_that_did_not_answer_is_down_and_the_others_are_served() -> None:
    worker = '# HELP x_total Xs.\n# TYPE x_total counter\nx_total{k="a"} 3.0\nx_created 1.0\n'
    merged = merge_expositions({0: worker, 1: None, 2: "# HELP up2 U.\n# TYPE up2 gauge\nup2 1\n"})
    assert merged.splitlines() == [
        "# HELP x_total Xs.",
        "# TYPE x_total counter",
        'x_total{purgatory_worker="0",k="a"} 3.0',
        'x_created{purgatory_worker="0"} 1.0',
        "# HELP up2 U.",
        "# TYPE up2 gauge",
        'up2{purgatory_worker="2"} 1',
        "# HELP purgatory_worker_up Whether the worker answered this scrape (1) or not (0).",
        "# TYPE purgatory_worker_up gauge",
        'purgatory_worker_up{purgatory_worker="0"} 1',
        'purgatory_worker_up{purgatory_worker="1"} 0',
        'purgatory_worker_up{purgatory_worker="2"} 1',
    ]


def test_a_busy_port_is_one_line_and_exit_status_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*PURGATORY_SERVER, "--workers", "2", "--listen", f"127.0.0.1:{port}"],
            cwd=tmp_path,  # its default ./data is its own, not the checkout's
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(f"cannot listen on 127.0.0.1:{port}: Address already in use")


def test_too_many_workers_is_refused_with_one_line_before_any_starts(tmp_path: Path) -> None:
    too_many = str(max_workers() + 1)
    started = time.monotonic()
    done = subprocess.run(
        [*PURGATORY_SERVER, "--workers", too_many, "--listen", "127.0.0.1:0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"purgatory-server: workers: {too_many} is more than {max_workers()}")
    assert not (tmp_path / "data").exists() and time.monotonic() - started < 30


def test_help_says_what_workers_0_means() -> None:
    done = subprocess.run(
        [*PURGATORY_SERVER, "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    text = " ".join(done.stdout.split())
    assert "auto or 0: one per usable core; at most 4 per usable core" in text


def test_a_worker_that_cannot_start_is_named_with_its_own_reason_last(tmp_path: Path) -> None:
    data = tmp_path / "data"
    holder = ["--data-dir", str(data), "--durable", "--purgatory", "orders"]
    with ServerProcess(tmp_path / "holder", holder):  # holds orders' journal lock
        done = subprocess.run(
            [*PURGATORY_SERVER, "--workers", "2", "--listen", "127.0.0.1:0", *holder],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert f"cannot start: worker {_owner('orders')}: journal directory " in last, last
    assert "is in use by another journal" in last and "its own --data-dir)" in last, last


def test_sigterm_stops_every_worker_within_about_a_second(tmp_path: Path) -> None:
    count = 4
    server = ServerProcess(tmp_path, ["--workers", str(count)], label="stop", start_timeout_s=90)
    with server:
        assert len(_worker_pids(server)) == count
        started = time.monotonic()
        assert server.stop() == 0
        took = time.monotonic() - started
    assert "supervisor: workers stopped" in server.log_text()
    assert took < 5, f"{count} workers took {took:.1f} s to stop"


def test_a_restarted_worker_creates_again_the_purgatories_made_at_run_time(
    tmp_path: Path,
) -> None:
    server = ServerProcess(tmp_path, ["--workers", "2"], label="kept", start_timeout_s=60)
    with server:
        own = _own_ports(server)
        gamma, gone = [n for n in (f"rt-{i}" for i in range(40)) if _owner(n) == 1][:2]
        shared = PurgatoryClient(f"127.0.0.1:{server.port}", timeout=10)
        direct = PurgatoryClient(f"127.0.0.1:{own[1]}", timeout=10)
        try:
            shared.create_purgatory(gamma, PurgatoryConfig(max_pending=7))
            shared.create_purgatory(gone)
            shared.try_complete_else_watch(["k"], 600_000, purgatory=gamma)
            assert shared.delete_purgatory(gone) == 0
            before = _worker_pids(server)
            os.kill(before[1], signal.SIGKILL)
            _wait_serving(direct, gamma, 30)
            assert _worker_pids(server)[1] != before[1]
            info = direct.get_purgatory(gamma)  # the definition, not the operations
            assert (info.config.max_pending, info.pending) == (7, 0)
            assert gone not in _names(shared) and gamma in _names(shared)
        finally:
            shared.close()
            direct.close()
