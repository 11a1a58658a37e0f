"""Generate the blocking client's modules from the asyncio ones (unasync, as httpcore does).

    python client/generate_sync.py           # (re)write the generated modules
    python client/generate_sync.py --check   # exit 1, with a diff, if one has drifted

The asyncio modules of ``client/purgatory_client`` (``SOURCES``) are the source; each
generated module is its source with the async spelling rewritten (``REWRITES``, then the
names in ``RENAMES``, whole words only, docstrings and comments included), imports sorted
and the result formatted by ruff with the project's settings. What cannot be spelled the
same in both flavors (threads vs tasks, gRPC's request iterator vs ``write()``) lives in
hand-written twins the sources import by name: ``_sync_session``/``_async_session``,
``dispatcher``/``async_dispatcher``, and the small readers and mailboxes of
``_liveness`` and ``_session_base``. Rewritten code (not prose) that still says
``async``, ``await``, ``asyncio``, ``aio`` or ``Async...`` is an error: the source needs
such a twin, or a rule here. Prose is renamed too, so docstrings are written for both.

Never edit a generated module (its first line says so): edit the source, then
``make sync-client``; ``make test`` runs ``make check-sync-client``.
"""

from __future__ import annotations

import argparse
import difflib
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "client" / "purgatory_client"

# asyncio source -> generated blocking module (both in PACKAGE).
SOURCES = {
    "_async.py": "_sync.py",
    "_async_delayed.py": "_sync_delayed.py",
    "_async_groups.py": "_sync_groups.py",
    "_async_schedules.py": "_sync_schedules.py",
    "_async_streams.py": "_sync_streams.py",
}

# Applied in order, before the renames.
REWRITES: tuple[tuple[str, str], ...] = (
    (r"^import asyncio$", "import time"),
    (r"\basyncio\.sleep\(", "time.sleep("),
    (r"\bgrpc\.aio\.", "grpc."),
    (r"\basync (def|for|with)\b", r"\1"),
    (r"\(await (\w[\w.]*\([^()]*\))\)", r"\1"),  # (await f(x)).y -> f(x).y
    (r"\bawait ", ""),
)

# Whole words: the async name -> the blocking one.
RENAMES = {
    # modules
    "_async": "_sync",
    "_async_delayed": "_sync_delayed",
    "_async_groups": "_sync_groups",
    "_async_schedules": "_sync_schedules",
    "_async_session": "_sync_session",
    "_async_streams": "_sync_streams",
    "async_dispatcher": "dispatcher",
    # classes of the generated modules
    "AsyncPurgatoryClient": "PurgatoryClient",
    "AsyncDelayedMethods": "DelayedMethods",
    "AsyncGroupMethods": "GroupMethods",
    "AsyncGroupStream": "GroupStream",
    "AsyncScheduleMethods": "ScheduleMethods",
    "AsyncStreamMethods": "StreamMethods",
    # their hand-written twins
    "AsyncBatchingDispatcher": "BatchingDispatcher",
    "AsyncDelivery": "Delivery",
    "AsyncMailbox": "Mailbox",
    "AsyncSession": "SyncSession",
    "AsyncSessionMethods": "SessionMethods",
    "AsyncSessionTransport": "SessionTransport",
    "AsyncStreamReader": "StreamReader",
    # the language
    "AsyncIterator": "Iterator",
    "StopAsyncIteration": "StopIteration",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "aclose": "close",
}

# ``for x in y: yield x`` -> ``yield from y`` (what ruff's UP028 asks for).
_YIELD_LOOP = re.compile(r"^( *)for (\w+) in (.+):\n\1    yield \2\n", re.MULTILINE)
_LEFTOVER = re.compile(r"(async|await|asyncio|aio|Async[A-Z]\w*|__a(enter|exit|iter|next)__)$")
_RENAME = re.compile(r"\b(" + "|".join(sorted(RENAMES, key=len, reverse=True)) + r")\b")

HEADER = (
    "# Generated from {source} by client/generate_sync.py: do not edit by hand.\n"
    "# Edit {source}, then run `make sync-client` (`make test` checks this file).\n"
)


def unasync(text: str, source: str) -> str:
    """``text`` (the module ``source``) in its blocking spelling, unformatted."""
    for pattern, replacement in REWRITES:
        text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    text = _RENAME.sub(lambda m: RENAMES[m.group(1)], text)
    text = _YIELD_LOOP.sub(r"\1yield from \3\n", text)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NAME and _LEFTOVER.match(token.string):
            raise SystemExit(
                f"{source}: rewritten line {token.start[0]} still says {token.string!r}: "
                f"{token.line.strip()}\n(give it a hand-written twin, or a rule in {__file__})"
            )
    return HEADER.format(source=source) + text


def _ruff(args: list[str], text: str, target: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(target), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"ruff {args[0]} failed on {target.name}:\n{done.stderr}{done.stdout}")
    return done.stdout


def generate(source: str, target: str) -> str:
    """The generated text of ``target``: ``source`` rewritten, imports sorted, formatted."""
    path = PACKAGE / target
    text = unasync((PACKAGE / source).read_text(), source)
    text = _ruff(["check", "--fix-only", "--select", "I", "--quiet"], text, path)
    return _ruff(["format", "--quiet"], text, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="only compare: exit 1 if a module has drifted"
    )
    args = parser.parse_args(argv)
    drifted = []
    for source, target in SOURCES.items():
        path = PACKAGE / target
        text = generate(source, target)
        current = path.read_text() if path.exists() else ""
        if current == text:
            continue
        if args.check:
            drifted.append(target)
            diff = difflib.unified_diff(
                text.splitlines(keepends=True),
                current.splitlines(keepends=True),
                f"{target} (generated from {source})",
                f"{target} (on disk)",
            )
            sys.stderr.writelines(diff)
        else:
            path.write_text(text)
            sys.stderr.write(f"wrote {path.relative_to(ROOT)} from {source}\n")
    if drifted:
        sys.stderr.write(
            f"generated modules differ from their asyncio sources: {', '.join(drifted)}; "
            "edit the source (not the generated module) and run `make sync-client`\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
