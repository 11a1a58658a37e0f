"""CI's newcomer: README.md's walk-through, in order, in the clean clone, before `make test`.

`.ci/run` calls this first, so the `make test` that follows runs beside what a newcomer's
checkout holds after following the README: `.venv` made by `make serve`, and a populated
`./data` (`purgatory purgatories create orders --durable` creates `./data/orders`).

The commands come from README.md itself (harness/readme.py, the parser tests/test_readme.py
uses), in the README's order: every fenced block, and the inline commands in ``INLINE``
where the README gives them. Shell lines run one by one with bash; Python blocks run with
`.venv/bin/python`. `make serve` and the other lines that end in `&` run in the background
in their own process group; the walk-through waits on state (a log line, a port, an
operation's state), never for a fixed time. At the end, and on any failure or signal,
every background process is stopped with SIGTERM (SIGKILL only after a bounded wait);
`./data` stays.

What it does not run, and why (``SKIPPED``): `make test` (CI's next step), `make cluster`
(runs in the foreground until Ctrl-C; tests/cluster/test_make_cluster.py starts it), Docker
(no Docker engine on CI). `make pipeline` is only named in prose; it starts Spark twice
(more than a minute on CI's 2 cores), and tests/pipeline runs the same jobs.

The README's fixed ports (50051 for `make serve`, 50052 and 9464 for the metrics example)
are used when free; one that is taken is replaced by a free one (`make serve
ARGS="--listen ..."`, `PURGATORY_TARGET`, the examples' HOST:PORT argument), as the README
allows. A checkout that already has `./data` is not a newcomer's: the walk-through says so
and does nothing. `--list` prints the steps, in order, without running them
(tests/test_readme.py checks them, so `make test` catches a README change that moves one).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.readme import ROOT, commands, fenced_at, inline_at, readme_text

LOGS = ROOT / "test-artifacts" / "readme-walkthrough"
PY = ".venv/bin/python"
DEFAULT = "127.0.0.1:50051"
FIXED_PORTS = (50051, 50052, 9464)
# Inline commands the README gives in its prose, run where they appear: (the paragraph
# that gives it, the command). The set-up section names some of them too, as what CI runs.
INLINE = (
    ("**Delayed messages.**", "purgatory ls --prefix unpaid-"),
    ("**Delayed messages.**", "purgatory reschedule unpaid-42 --timeout-ms 2700000"),
    ("**Durable purgatories.**", "purgatory purgatories create orders --durable"),
)
# Fenced blocks not run (a line that identifies each) and why.
SKIPPED = {
    "make cluster CLUSTER_PORT": "`make cluster` runs in the foreground until Ctrl-C "
    "(tests/cluster/test_make_cluster.py starts it)",
    "docker build -t purgatory .": "no Docker engine on CI",
}
# Single lines not run, and why.
SKIPPED_LINES = {"make test": "CI's next step, beside what this leaves"}
START_TIMEOUT_S = 600.0  # the first `make serve` installs .venv: 1-6 minutes
STEP_TIMEOUT_S = 600.0  # `make install`, `make node-build` (npm ci) in a fresh clone

_background: list[tuple[str, subprocess.Popen[bytes]]] = []


class WalkthroughError(Exception):
    pass


_STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"readme-walkthrough [{time.monotonic() - _STARTED:5.1f} s]: {message}", flush=True)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _any_free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ports() -> dict[int, int]:
    """README port -> the port used here (the same one when free)."""
    ports = {p: p if _free(p) else _any_free_port() for p in FIXED_PORTS}
    for readme, used in ports.items():
        if readme != used:
            say(f"port {readme} is taken here: using {used} instead")
    return ports


def _until(what: str, check: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise WalkthroughError(f"{what}: not reached in {timeout_s:.0f} s")
        time.sleep(0.1)


def _log(name: str) -> Path:
    return LOGS / (re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")[:60] + ".log")


def _tail(path: Path, lines: int = 30) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


class Walkthrough:
    def __init__(self) -> None:
        self.ports = _ports()
        self.target = f"127.0.0.1:{self.ports[50051]}"
        self.env = dict(os.environ, PURGATORY_TARGET=self.target)
        self.env.pop("PURGATORY_LISTEN", None)

    def _rewrite(self, command: str) -> str:
        """The README's ports replaced by the ones used here (the same when free). The CLI
        and the examples find make serve's server through PURGATORY_TARGET."""
        for readme, used in self.ports.items():
            command = re.sub(rf"(?<=:){readme}\b", str(used), command)
        return command

    def sh(self, command: str, timeout_s: float = STEP_TIMEOUT_S) -> str:
        say(f"$ {command}")
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        out = done.stdout.strip()
        if out:
            print("\n".join(out.splitlines()[:20]), flush=True)
        if done.returncode != 0:
            raise WalkthroughError(f"{command!r} exited {done.returncode}: {done.stderr[-2000:]}")
        return done.stdout

    def background(self, command: str) -> None:
        log = _log(command)
        say(f"$ {command} &   (log: {log.relative_to(ROOT)})")
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["bash", "-c", f"exec {command}"],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: stopping it stops its children
            )
        _background.append((command, proc))

        def alive() -> None:
            if proc.poll() is not None:
                raise WalkthroughError(f"{command!r} exited {proc.returncode}:\n{_tail(log)}")

        if command.startswith("make serve"):
            # The server's own line, on the address it was given: the port is ours.
            pattern = re.compile(rf"listening on {re.escape(self.target)}\b")

            def listening() -> bool:
                alive()
                return bool(pattern.search(log.read_text(errors="replace")))

            _until(f"{command!r} listening on {self.target}", listening, START_TIMEOUT_S)
        elif (m := re.search(r"--listen (\S+)", command)) is not None:
            # A second server: its "listening" line comes once it serves (metrics included).
            pattern = re.compile(rf"listening on {re.escape(m[1])}\b")

            def serving() -> bool:
                alive()
                return bool(pattern.search(log.read_text(errors="replace")))

            _until(f"{command!r} listening on {m[1]}", serving, 60)
        elif (m := re.search(r"purgatory watch \S+ .*--id (\S+)", command)) is not None:
            op = m[1]
            get = [str(ROOT / ".venv/bin/purgatory"), "get", op]

            def watching() -> bool:
                alive()
                done = subprocess.run(
                    get, env=self.env, capture_output=True, text=True, check=False
                )
                return done.returncode == 0 and '"WATCHING"' in done.stdout

            _until(f"operation {op} registered", watching, 60)
        else:
            raise WalkthroughError(f"no state known to wait on for {command!r}: teach me")

    def finish_block(self) -> None:
        """A block's background commands that are not servers end within the block."""
        for command, proc in list(_background):
            if "--listen" in command or command.startswith("make serve"):
                continue
            try:
                rc = proc.wait(60)
            except subprocess.TimeoutExpired:
                raise WalkthroughError(f"{command!r} still running after its block") from None
            _background.remove((command, proc))
            if rc != 0:
                raise WalkthroughError(f"{command!r} exited {rc}:\n{_tail(_log(command))}")
            say(f"{command!r} ended: {_tail(_log(command), 3)}")

    def shell_block(self, body: str) -> None:
        for readme_line in commands(body):
            if readme_line in SKIPPED_LINES:
                say(f"not run: {readme_line} ({SKIPPED_LINES[readme_line]})")
                continue
            line = self._rewrite(readme_line)
            if line.startswith("make serve") and self.target != DEFAULT:
                line = f'{line} ARGS="--listen {self.target}"'
            if line.startswith("make serve"):
                # "In a second terminal, while `make serve` runs": it runs until stopped.
                self.background(line)
            elif line.endswith("&"):
                self.background(line[:-1].strip())
            else:
                self.sh(line)
        self.finish_block()

    def python_block(self, body: str) -> None:
        say(f"python: {body.strip().splitlines()[0]} ...")
        code = body.replace(f'"{DEFAULT}"', f'"{self.target}"')
        self.sh(f"{PY} - <<'README_PYTHON'\n{code}README_PYTHON", timeout_s=120)

    def run(self) -> None:
        for kind, body in steps():
            skip = [why for marker, why in SKIPPED.items() if marker in body]
            if skip:
                say(f"not run: the block with {body.splitlines()[0]!r} ({skip[0]})")
            elif kind == "inline":
                self.sh(body.replace("purgatory ", ".venv/bin/purgatory ", 1))
            elif kind == "python":
                self.python_block(body)
            elif kind == "sh":
                self.shell_block(body)
            else:
                raise WalkthroughError(f"a README block in {kind!r}: teach me to run it")
        if not (ROOT / "data" / "orders").is_dir():
            raise WalkthroughError("./data/orders is missing after the walk-through")


def steps() -> list[tuple[str, str]]:
    """(kind, body) of each step in the README's order: a fenced block's language and
    body, or ``inline`` and the command."""
    text = readme_text()
    found = [(at, lang, body) for at, lang, body in fenced_at(text)]
    try:
        found += [(inline_at(text, c, after), "inline", c) for after, c in INLINE]
    except ValueError as exc:
        raise WalkthroughError(f"{exc}: update INLINE") from None
    return [(kind, body) for _, kind, body in sorted(found)]


def stop_all() -> None:
    """SIGTERM to each background group, newest first; SIGKILL after a bounded wait."""
    left: WalkthroughError | None = None
    while _background:
        command, proc = _background.pop()
        if proc.poll() is None:
            say(f"stopping {command!r} (SIGTERM)")
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(30)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                say(f"{command!r} did not stop in 30 s: SIGKILL")
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

        # Its children (make serve's server) leave with it: wait until the group is gone.
        def gone(pgid: int = proc.pid) -> bool:
            return not any(_group(pid) == pgid for pid in _pids())

        try:
            _until(f"{command!r}'s processes gone", gone, 30)
        except WalkthroughError as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            left = left or exc
        log = _log(command).read_text(errors="replace")
        if command.startswith("make serve") and not re.search(r"server on port \d+ stopped", log):
            left = left or WalkthroughError(f"{command!r} did not stop cleanly:\n{log[-2000:]}")
    if left is not None:
        raise left


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _group(pid: int) -> int | None:
    """The process group of a live (not zombie) process, None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[2])


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main() -> int:
    if sys.argv[1:] == ["--list"]:  # the steps, not run (tests/test_readme.py reads them)
        try:
            for kind, body in steps():
                print(f"{kind}: {body.strip().splitlines()[0]}")
        except WalkthroughError as exc:
            say(f"FAILED: {exc}")
            return 1
        return 0
    if (ROOT / "data").exists():
        say("./data exists: not a fresh clone, so not a newcomer's walk-through; skipped")
        return 0
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    LOGS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    failed = None
    try:
        Walkthrough().run()
    except WalkthroughError as exc:
        failed = str(exc)
    finally:
        try:
            stop_all()
        except WalkthroughError as exc:
            failed = failed or str(exc)
    if failed:
        say(f"FAILED: {failed}")
        return 1
    entries = sorted(p.name for p in (ROOT / "data").iterdir())
    say(f"done in {time.monotonic() - started:.0f} s; ./data holds {shlex.join(entries)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
