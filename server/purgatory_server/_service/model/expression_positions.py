"""Where in a CEL text its type error is: the library reports a type error with no
position ("No such overload"), so :func:`locate` finds it with the library itself.

The text is split at its operators, lowest precedence first (``?:``, ``||``, ``&&``, the
relations and ``in``, ``+ -``, ``* / %``, then the unary ``! -``), outside string
literals and brackets. Each operand is compiled and evaluated alone on the probe: an
operand that fails holds the error (the search goes on inside it); when every operand
evaluates, the error is the operator's own (``1 + "a"``), found as the first operator
whose prefix of the chain fails, and named with its operands' types. A call's arguments
are searched the same way, and a call whose arguments all evaluate is the error's place
(a function without an overload for their types); so is a term with neither. Nothing here
evaluates an expression: the library does, on texts cut from the caller's.

Positions are 1-based line:column, as in the library's syntax errors. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterator

import cel

from purgatory_server._service.model.attributes import JsonValue
from purgatory_server._service.model.quoting import quote

__all__ = ["MAX_EVALUATIONS", "Failure", "locate", "position", "skip_string"]

# What an evaluation raises for a type error, and for a function called with arguments
# of types it has no overload for (reported as an unknown function).
Failure = (TypeError, RuntimeError)
# The budget of a search, in characters compiled, each compilation counting as
# _EVALUATION_COST more: a few milliseconds at most, once per distinct text.
MAX_EVALUATIONS = 4096
_EVALUATION_COST = 128
# Binary operators by precedence, lowest first; longest spelling first in each level.
_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",),
    ("&&",),
    ("==", "!=", "<=", ">=", "<", ">", "in"),
    ("+", "-"),
    ("*", "/", "%"),
)
# Macros: their arguments bind a variable of their own, so none evaluates alone.
_MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter"})
_OPEN = "([{"
_CLOSE = ")]}"
# A '-' after one of these ends an operand, so it is binary (``a - b``), not a sign.
_OPERAND_END = frozenset(")]}\"'_.")


def position(text: str, offset: int) -> str:
    """``offset`` of ``text`` as line:column."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"{line}:{column}"


def locate(text: str, probe: dict[str, JsonValue]) -> tuple[int, str] | None:
    """The offset of the failing part of ``text`` on ``probe`` and what fails there (an
    operator between the types of its operands, or a term quoted), or None if no part of
    it fails alone or the search ran out of its :data:`MAX_EVALUATIONS`."""
    search = _Search(text, probe)
    try:
        if not search.fails(0, len(text)):
            return None
        return search.within(0, len(text))
    except _OutOfEvaluations:
        return None


class _OutOfEvaluations(Exception):
    pass


class _Search:
    """One search (module docstring); each part compiled counts its length against the
    budget, so a long hostile text costs a bounded time, once (the verdict is cached)."""

    def __init__(self, text: str, probe: dict[str, JsonValue]) -> None:
        self.text = text
        self.probe = probe
        self.left = MAX_EVALUATIONS

    def within(self, start: int, end: int) -> tuple[int, str]:
        """The failing place inside ``[start, end)``, which fails."""
        text = self.text
        start, end = _strip(text, start, end)
        question = _top_level(text, start, end, ("?",))
        if question:
            return self.in_conditional(start, end, question[0][0])
        for level in _LEVELS:
            found = _top_level(text, start, end, level)
            if found:
                return self.in_chain(start, end, found)
        if text[start] in "!-":
            operand = _skip_spaces(text, start + 1, end)
            if operand < end and self.fails(operand, end):
                return self.within(operand, end)
            return start, f"{text[start]!r} on {self.type_of(operand, end)}"
        call = _call(text, start, end)
        if call is not None:
            name_at, name, args = call
            inner = self.first_failing(args)
            if inner is not None:
                return inner
            if name not in _MACROS:
                typed = [(a, b) for a, b in args if text[a:b].strip()]
                if name_at > start and text[name_at - 1] == ".":  # a method: receiver first
                    typed.insert(0, (start, name_at - 1))
                types = ", ".join(self.type_of(a, b) for a, b in typed) or "no arguments"
                return name_at, f"{name}() has no overload for ({types})"
        return start, quote(text[start:end], 60)

    def in_conditional(self, start: int, end: int, q: int) -> tuple[int, str]:
        """``[start, end)`` is ``c ? a : b`` with its ``?`` at ``q``."""
        colon = _top_level(self.text, q + 1, end, (":",))
        parts = [(start, q), (q + 1, colon[0][0] if colon else end)]
        if colon:
            parts.append((colon[0][0] + 1, end))
        inner = self.first_failing(parts)
        return inner or (q, f"'?' on {self.type_of(start, q)}, not bool")

    def in_chain(self, start: int, end: int, found: list[tuple[int, str]]) -> tuple[int, str]:
        """``[start, end)`` is operands joined by the operators ``found`` (one level)."""
        bounds = [start, *(i for i, _ in found), end]
        parts = [
            (bounds[k] + (len(found[k - 1][1]) if k else 0), bounds[k + 1])
            for k in range(len(bounds) - 1)
        ]
        inner = self.first_failing(parts)
        if inner is not None:
            return inner

        # Every operand evaluates: the first operator whose prefix of the chain fails.
        # Without short-circuits (not && or ||) a failing prefix fails longer too, so
        # the first one is bisected for; with them it is looked for in order.
        def upto(k: int) -> int:
            return found[k + 1][0] if k + 1 < len(found) else end

        first = len(found) - 1
        if found[0][1] in ("&&", "||"):
            first = next((k for k in range(len(found)) if self.fails(start, upto(k))), first)
        else:
            low = 0
            while low < first:
                middle = (low + first) // 2
                if self.fails(start, upto(middle)):
                    first = middle
                else:
                    low = middle + 1
        i, op = found[first]
        left, right = self.type_of(start, i), self.type_of(i + len(op), upto(first))
        return i, f"{op!r} between {left} and {right}"

    def first_failing(self, parts: list[tuple[int, int]]) -> tuple[int, str] | None:
        for bounds in parts:
            a, b = _strip(self.text, *bounds)
            if a < b and self.fails(a, b):
                return self.within(a, b)
        return None

    def fails(self, start: int, end: int) -> bool:
        """Whether ``text[start:end]`` alone fails on the probe as a type error does."""
        try:
            self.evaluate(self.text[start:end])
        except Failure:
            return True
        except (ValueError, LookupError, ArithmeticError):
            return False  # a cut the parser refuses, an absent attribute, a value's error
        return False

    def type_of(self, start: int, end: int) -> str:
        """The CEL type name of ``text[start:end]`` on the probe ("a value" if it fails)."""
        try:
            return str(self.evaluate(f"type({self.text[start:end]})"))
        except (ValueError, LookupError, ArithmeticError, *Failure):
            return "a value"

    def evaluate(self, part: str) -> object:
        self.left -= len(part) + _EVALUATION_COST
        if self.left < 0:
            raise _OutOfEvaluations
        return cel.compile(part).execute(self.probe)


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` without surrounding spaces and enclosing parentheses."""
    while True:
        start = _skip_spaces(text, start, end)
        while end > start and text[end - 1] in " \t\r\n":
            end -= 1
        if end - start >= 2 and text[start] == "(" and _closing(text, start, end) == end - 1:
            start, end = start + 1, end - 1
            continue
        return start, end


def _skip_spaces(text: str, i: int, end: int) -> int:
    while i < end and text[i] in " \t\r\n":
        i += 1
    return i


def _scan(text: str, start: int, end: int) -> Iterator[tuple[int, str, int]]:
    """(index, character, bracket depth) of each character of ``[start, end)`` outside
    string literals (a literal yields its opening quote alone); a closing bracket has the
    depth of its opening one."""
    depth = 0
    i = start
    while i < end:
        c = text[i]
        if c in "'\"":
            yield i, c, depth
            i = skip_string(text, i, end)
            continue
        if c in _CLOSE:
            depth -= 1
        yield i, c, depth
        if c in _OPEN:
            depth += 1
        i += 1


def _closing(text: str, open_at: int, end: int) -> int:
    """The index of the bracket closing the one at ``open_at`` (``end`` if none)."""
    for i, c, depth in _scan(text, open_at, end):
        if depth == 0 and c in _CLOSE:
            return i
    return end


def _top_level(text: str, start: int, end: int, ops: tuple[str, ...]) -> list[tuple[int, str]]:
    """The occurrences of ``ops`` in ``[start, end)`` outside strings and brackets."""
    found: list[tuple[int, str]] = []
    last = ""  # the last character that is not a space
    resume = start  # past the operator found last
    for i, c, depth in _scan(text, start, end):
        if i < resume:
            continue
        if depth == 0 and c not in _OPEN and c not in _CLOSE and c not in "'\"":
            op = _operator_at(text, i, end, ops, last)
            if op:
                found.append((i, op))
                resume = i + len(op)
                last = op[-1]
                continue
        if c not in " \t\r\n":
            last = c
    return found


def _operator_at(text: str, i: int, end: int, ops: tuple[str, ...], last: str) -> str:
    """The operator of ``ops`` spelled at ``i`` (binary, where a sign is possible)."""
    for op in ops:
        if not text.startswith(op, i) or i + len(op) > end:
            continue
        if op == "in":
            before = text[i - 1] if i else " "
            after = text[i + 2] if i + 2 < end else " "
            if before.isalnum() or before in "_." or after.isalnum() or after == "_":
                continue
            return op
        if op == "-" and not (last.isalnum() or last in _OPERAND_END):
            continue  # a sign, not a subtraction
        return op
    return ""


def _call(text: str, start: int, end: int) -> tuple[int, str, list[tuple[int, int]]] | None:
    """The call that ends ``[start, end)``, if it is one: where its name starts, the
    name, and its arguments' bounds (none for a macro: they bind a variable of their own,
    so none evaluates alone)."""
    if end <= start or text[end - 1] != ")":
        return None
    opens = [i for i, c, depth in _scan(text, start, end) if c == "(" and depth == 0]
    if not opens or _closing(text, opens[-1], end) != end - 1:
        return None
    i = opens[-1]
    name_at = i
    while name_at > start and (text[name_at - 1].isalnum() or text[name_at - 1] == "_"):
        name_at -= 1
    name = text[name_at:i]
    if not name or name in _MACROS:
        return (name_at, name, []) if name else None
    commas = [j for j, _ in _top_level(text, i + 1, end - 1, (",",))]
    bounds = [i, *commas, end - 1]
    return name_at, name, [(bounds[k] + 1, bounds[k + 1]) for k in range(len(bounds) - 1)]


def skip_string(text: str, start: int, end: int) -> int:
    """The index just past the string literal opening at ``start``."""
    quote = text[start]
    triple = text.startswith(quote * 3, start)
    raw = start > 0 and text[start - 1] in "rR"
    i = start + (3 if triple else 1)
    while i < end:
        c = text[i]
        if c == "\\" and not raw:
            i += 2
            continue
        if triple:
            if text.startswith(quote * 3, i):
                return i + 3
        elif c == quote:
            return i + 1
        i += 1
    return end
