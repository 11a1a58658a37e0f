"""Placement of purgatories on servers: how much moves when membership changes.

A simulation for docs/scale-out.md §6, not a benchmark of the server: it needs no server,
no network and no engine. It places P purgatories on N servers with three rules and
applies a seeded sequence of joins and leaves:

- ``rendezvous``: highest-random-weight hashing, the rule the servers use: the score is
  the server's own (``purgatory_server._cluster.placement``: ``mix(h64(purgatory),
  h64(member))``, hashes precomputed per name), so the paper and the code agree. A
  purgatory goes to the live member with the highest score. A join takes
  exactly the purgatories whose new top score is the newcomer's; a leave moves exactly
  the leaver's purgatories, each to its second choice. Both are O(P) to recompute.
- ``ring``: a consistent-hash ring with ``--vnodes`` points per member (Dynamo style).
- ``modulo``: ``hash(purgatory) % N`` over the sorted member list, the naive rule, as the
  worst case to compare with.

For each rule it reports, over the change sequence, the fraction of purgatories moved per
change against the ideal (1/N for a leave, 1/(N+1) for a join: only the purgatories that
must move), and the load imbalance (the busiest member's purgatories over the mean).

Run: ``python -m bench.placement_sim`` (defaults: 100..500 servers, 10,000 purgatories,
40 changes each). Deterministic for a given ``--seed``.
"""

from __future__ import annotations

import argparse
import bisect
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence

from purgatory_server._cluster.placement import h64, mix

from bench._common import markdown_table


class Placement:
    """A rule's current assignment; ``join``/``leave`` return how many purgatories moved."""

    def __init__(self, purgatories: Sequence[str], members: Sequence[str]) -> None:
        self.purgatories = list(purgatories)
        self.p_hash = [h64(p) for p in self.purgatories]
        self.members: dict[str, int] = {m: h64(m) for m in members}
        self.owner: list[str] = []

    def loads(self) -> Counter[str]:
        counts = Counter(self.owner)
        for m in self.members:
            counts.setdefault(m, 0)
        return counts

    def join(self, member: str) -> int:
        raise NotImplementedError

    def leave(self, member: str) -> int:
        raise NotImplementedError


class Rendezvous(Placement):
    def __init__(self, purgatories: Sequence[str], members: Sequence[str]) -> None:
        super().__init__(purgatories, members)
        self.score: list[int] = []
        for ph in self.p_hash:
            best, owner = max((mix(ph, mh), m) for m, mh in self.members.items())
            self.owner.append(owner)
            self.score.append(best)

    def join(self, member: str) -> int:
        mh = self.members[member] = h64(member)
        moved = 0
        for i, ph in enumerate(self.p_hash):
            s = mix(ph, mh)
            if s > self.score[i]:
                self.score[i], self.owner[i] = s, member
                moved += 1
        return moved

    def leave(self, member: str) -> int:
        del self.members[member]
        moved = 0
        for i, ph in enumerate(self.p_hash):
            if self.owner[i] == member:
                best, owner = max((mix(ph, mh), m) for m, mh in self.members.items())
                self.score[i], self.owner[i] = best, owner
                moved += 1
        return moved


class Ring(Placement):
    def __init__(self, purgatories: Sequence[str], members: Sequence[str], vnodes: int) -> None:
        super().__init__(purgatories, members)
        self.vnodes = vnodes
        self.points: list[tuple[int, str]] = sorted(
            (h64(f"{m}#{v}"), m) for m in members for v in range(vnodes)
        )
        self.owner = [self._lookup(ph) for ph in self.p_hash]

    def _lookup(self, ph: int) -> str:
        i = bisect.bisect_left(self.points, (ph, ""))
        return self.points[i % len(self.points)][1]

    def _reassign(self) -> int:
        new = [self._lookup(ph) for ph in self.p_hash]
        moved = sum(a != b for a, b in zip(self.owner, new, strict=True))
        self.owner = new
        return moved

    def join(self, member: str) -> int:
        self.members[member] = h64(member)
        for v in range(self.vnodes):
            bisect.insort(self.points, (h64(f"{member}#{v}"), member))
        return self._reassign()

    def leave(self, member: str) -> int:
        del self.members[member]
        self.points = [p for p in self.points if p[1] != member]
        return self._reassign()


class Modulo(Placement):
    def __init__(self, purgatories: Sequence[str], members: Sequence[str]) -> None:
        super().__init__(purgatories, members)
        self.owner = self._assign()

    def _assign(self) -> list[str]:
        order = sorted(self.members)
        return [order[ph % len(order)] for ph in self.p_hash]

    def _reassign(self) -> int:
        new = self._assign()
        moved = sum(a != b for a, b in zip(self.owner, new, strict=True))
        self.owner = new
        return moved

    def join(self, member: str) -> int:
        self.members[member] = h64(member)
        return self._reassign()

    def leave(self, member: str) -> int:
        del self.members[member]
        return self._reassign()


def simulate(
    make: Callable[[list[str], list[str]], Placement],
    servers: int,
    purgatories: int,
    changes: int,
    seed: int,
) -> dict[str, float]:
    """Apply ``changes`` random joins/leaves; summarise moved fractions and imbalance."""
    rng = random.Random(seed)
    names = [f"purgatory-{i}" for i in range(purgatories)]
    members = [f"server-{i}" for i in range(servers)]
    started = time.perf_counter()
    placement = make(names, members)
    excess: list[float] = []  # moved / ideal, per change
    moved_fraction: list[float] = []
    imbalance: list[float] = []
    next_id = servers
    for _ in range(changes):
        live = list(placement.members)
        if rng.random() < 0.5 and len(live) > 2:
            n = len(live)
            moved = placement.leave(rng.choice(live))
            ideal = purgatories / n
        else:
            n = len(live) + 1
            moved = placement.join(f"server-{next_id}")
            next_id += 1
            ideal = purgatories / n
        moved_fraction.append(moved / purgatories)
        excess.append(moved / ideal)
        loads = placement.loads()
        imbalance.append(max(loads.values()) / (purgatories / len(loads)))
    return {
        "moved_mean": statistics.fmean(moved_fraction),
        "moved_max": max(moved_fraction),
        "vs_ideal_mean": statistics.fmean(excess),
        "vs_ideal_max": max(excess),
        "imbalance_mean": statistics.fmean(imbalance),
        "imbalance_max": max(imbalance),
        "seconds": time.perf_counter() - started,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, nargs="+", default=[100, 300, 500])
    parser.add_argument("--purgatories", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=40)
    parser.add_argument("--vnodes", type=int, default=128)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--quick", action="store_true", help="20 servers, 1,000 purgatories")
    args = parser.parse_args(argv)
    if args.quick:
        args.servers, args.purgatories, args.changes = [20], 1_000, 10
    rules: dict[str, Callable[[list[str], list[str]], Placement]] = {
        "rendezvous": Rendezvous,
        f"ring ({args.vnodes} vnodes)": lambda p, m: Ring(p, m, args.vnodes),
        "modulo": Modulo,
    }
    rows = []
    for servers in args.servers:
        for rule, make in rules.items():
            r = simulate(make, servers, args.purgatories, args.changes, args.seed)
            rows.append(
                [
                    servers,
                    rule,
                    f"{100 * r['moved_mean']:.2f}%",
                    f"{100 * r['moved_max']:.2f}%",
                    r["vs_ideal_mean"],
                    r["vs_ideal_max"],
                    r["imbalance_mean"],
                    r["imbalance_max"],
                    r["seconds"],
                ]
            )
    print(
        f"{args.purgatories:,} purgatories, {args.changes} random joins/leaves per row, "
        f"seed {args.seed}\n"
    )
    print(
        markdown_table(
            [
                "servers",
                "rule",
                "moved per change (mean)",
                "moved (max)",
                "moved / ideal (mean)",
                "moved / ideal (max)",
                "busiest / mean load (mean)",
                "busiest / mean (max)",
                "run s",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
