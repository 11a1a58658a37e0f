"""Each purgatory setting declared once: name, type, default, bounds and meaning.

:class:`PurgatorySettings` is the declaration: every field but ``name`` is made by
:func:`setting`, which records a :class:`Setting` in the field's metadata. Everything
else follows from it:

- the TOML, environment and flag parsing (``config._merge`` over the dataclass fields);
- validation (:meth:`PurgatorySettings.validate`, :func:`setting_bounds`, used by
  ``limits.check_settings`` for CreatePurgatory);
- the wire mapping (:meth:`PurgatorySettings.from_wire`, :meth:`PurgatorySettings.to_wire`;
  ``in_proto=False`` marks the server-only ones) and the server defaults filled into a
  CreatePurgatory request (:meth:`PurgatorySettings.over`);
- the catalog of durable purgatories (``catalog``: the dataclass as JSON).

Frozen dataclasses: built once, read from any thread without locking.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol, TypeVar

__all__ = [
    "FSYNC_POLICIES",
    "MAX_TICK_MS",
    "MAX_WHEEL_SIZE",
    "PROTO_SETTINGS",
    "SETTINGS",
    "UINT32_MAX",
    "ConfigError",
    "PurgatorySettings",
    "Setting",
    "setting_bounds",
]

# Ranges of the engine settings: the wire fields are uint32, but a wheel of billions of
# buckets would hang the server while it is allocated, and one bucket cannot turn.
MAX_TICK_MS = 60_000
MAX_WHEEL_SIZE = 4096
UINT32_MAX = 2**32 - 1
DEFAULT_MAX_RETAINED_EVENTS = 1_000_000
FSYNC_POLICIES = frozenset({"always", "interval", "never"})

T = TypeVar("T", int, bool, str)
W = TypeVar("W")


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the offending option."""


class SettingLimits(Protocol):
    """The server limits a setting's upper bound may come from (``config.Limits``)."""

    @property
    def max_retained_events(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Setting:
    """One purgatory setting. Zero (``0``, ``False``, ``""``) on the wire means "the
    server's default"; ``low``/``high`` bound a non-zero int, ``high_limit`` names the
    server limit that replaces ``high``, ``choices`` the allowed non-empty strings."""

    name: str
    kind: type
    default: int | bool | str
    doc: str
    low: int = 0
    high: int = UINT32_MAX
    high_limit: str = ""
    choices: frozenset[str] = frozenset()
    in_proto: bool = True

    def bounds(self, limits: SettingLimits | None) -> tuple[int, int]:
        high = self.high
        if self.high_limit and limits is not None:
            high = max(self.low, int(getattr(limits, self.high_limit)))
        return self.low, high

    def check(self, value: Any, limits: SettingLimits | None) -> None:
        """Raise :class:`ConfigError` unless ``value`` is allowed here."""
        if self.kind is str:
            if value and value not in self.choices:
                raise ConfigError(
                    f"{self.name} must be one of {sorted(self.choices)}, got {value!r}"
                )
            return
        if self.kind is bool:
            return
        low, high = self.bounds(limits)
        if low >= 1 and value <= 0:
            raise ConfigError(f"{self.name} must be positive, got {value}")
        if value < low:
            raise ConfigError(f"{self.name} must be >= {low}, got {value}")
        if value > high:
            raise ConfigError(f"{self.name} must be in [{low}, {high}], got {value}")


def setting(
    default: T,
    doc: str,
    *,
    low: int = 0,
    high: int = UINT32_MAX,
    high_limit: str = "",
    choices: frozenset[str] = frozenset(),
    in_proto: bool = True,
) -> T:
    """A :class:`PurgatorySettings` field declared with its :class:`Setting`."""
    spec = Setting("", type(default), default, doc, low, high, high_limit, choices, in_proto)
    return field(default=default, metadata={"setting": spec})


@dataclass(frozen=True, slots=True)
class PurgatorySettings:
    """One purgatory's engine settings and its own limits (docs/configuration.md)."""

    name: str = "default"
    tick_ms: int = setting(
        1, "timing-wheel tick in ms: the expiry resolution", low=1, high=MAX_TICK_MS
    )
    wheel_size: int = setting(20, "buckets per timing-wheel level", low=2, high=MAX_WHEEL_SIZE)
    purge_interval: int = setting(
        1000, "kept for compatibility; no effect (nothing is left to purge)", low=1
    )
    max_pending: int = setting(
        1_000_000, "pending operations allowed at once (more: RESOURCE_EXHAUSTED)", low=1
    )
    retained_events: int = setting(
        10_000,
        "outcome events kept for subscribers resuming with after_sequence",
        low=1,
        high=DEFAULT_MAX_RETAINED_EVENTS,
        high_limit="max_retained_events",
    )
    # The dedup window (core/finished_ids.py, docs/service.md "Idempotency"): server-only.
    dedup_window_ms: int = setting(
        300_000,
        "how long a finished operation id is remembered, in ms: a re-send inside it "
        "answers with the recorded outcome and registers nothing",
        in_proto=False,
    )
    dedup_max_bytes: int = setting(
        64 * 1024 * 1024,
        "bytes the finished-id memory may hold; past it the oldest ids go first, even "
        "inside the window (counted by purgatory.dedup.evicted)",
        in_proto=False,
    )
    # Durable purgatories journal to ``<data_dir>/<name>/`` (docs/journal.md).
    durable: bool = setting(False, "journal the purgatory so it survives a restart")
    # Server-only: the fsync policy's per-purgatory overrides.
    fsync: str = setting(
        "",
        "this purgatory's fsync policy; empty: the server's",
        choices=FSYNC_POLICIES,
        in_proto=False,
    )
    fsync_interval_ms: int = setting(
        0, "this purgatory's fsync interval in ms; 0: the server's", in_proto=False
    )

    def validate(self, limits: SettingLimits | None = None) -> None:
        """Raise :class:`ConfigError` naming the first setting out of its range."""
        for spec in SETTINGS:
            spec.check(getattr(self, spec.name), limits)

    def over(self, defaults: PurgatorySettings) -> PurgatorySettings:
        """These settings (a request's) with each zero one, and each server-only one (no
        request carries it), taken from ``defaults``."""
        return replace(
            self,
            **{
                s.name: (s.in_proto and getattr(self, s.name)) or getattr(defaults, s.name)
                for s in SETTINGS
            },
        )

    @classmethod
    def from_wire(cls, name: str, config: Any) -> PurgatorySettings:
        """A ``PurgatoryConfig`` message's settings (zero: the default, see :meth:`over`)."""
        return cls(name, **{s.name: getattr(config, s.name) for s in PROTO_SETTINGS})

    def to_wire(self, config: W) -> W:
        """``config`` (an empty ``PurgatoryConfig`` message) filled with these settings."""
        for s in PROTO_SETTINGS:
            setattr(config, s.name, getattr(self, s.name))
        return config


def _declared() -> tuple[Setting, ...]:
    out = []
    for f in fields(PurgatorySettings):
        spec = f.metadata.get("setting")
        if spec is not None:
            out.append(replace(spec, name=f.name))
    return tuple(out)


# Every setting, in declaration order; the ones carried by the proto's PurgatoryConfig.
SETTINGS: tuple[Setting, ...] = _declared()
PROTO_SETTINGS: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.in_proto)


def setting_bounds(limits: SettingLimits | None) -> dict[str, tuple[int, int]]:
    """Inclusive range of each bounded int setting (a CreatePurgatory request's check)."""
    return {
        s.name: s.bounds(limits) for s in SETTINGS if s.kind is int and s.in_proto and s.low >= 1
    }
