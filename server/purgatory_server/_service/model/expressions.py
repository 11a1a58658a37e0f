"""Conditions' CEL expressions: compiled once per distinct text, checked, evaluated.

The library is ``common-expression-language`` (the ``cel`` module: Rust bindings; chosen
by measurement against ``cel-python``, docs/benchmarks.md §23). Expressions are untrusted
input, so :func:`check` refuses at registration (:class:`~.errors.InvalidArgument`
naming the field and, where the library gives one, the line:column):

- a text longer than ``max_expression_length`` or that does not parse;
- one over the **cost limit**: CEL has no loops and no recursion, only the comprehension
  macros (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) iterate, each over a
  value bounded by ``max_attributes_bytes`` or the text itself; a comprehension inside
  another (whose cost would multiply) or more than :data:`MAX_COMPREHENSIONS` of them is
  refused, so one evaluation is linear in its inputs. The library has no ``cel.bind``;
- a name outside the documented variables, a type error or a non-bool result found by a
  **probe** evaluation (empty signal attributes, the operation's own attributes), where
  that evaluation is not cut short by an absent attribute.

The library's programs have no side effects (no I/O, no clock, no host functions: none
is registered) and read only the context they are given. :func:`holds` is the one way
to evaluate: an error or a non-bool counts as false.

The compile cache (:func:`program`) is a bounded memo of a pure function, like ``re``'s:
the same text always compiles to an equivalent program. Thread-safe (``lru_cache``).
"""

from __future__ import annotations

import functools
import re

import cel

from purgatory_server._service.model.attributes import JsonValue
from purgatory_server._service.model.errors import InvalidArgument

__all__ = [
    "CACHE_SIZE",
    "FILTER_VARIABLES",
    "MAX_COMPREHENSIONS",
    "PREDICATE_VARIABLES",
    "Context",
    "check",
    "holds",
    "program",
]

# Distinct expression texts kept compiled.
CACHE_SIZE = 4096
# Comprehension macros per expression (none may nest in another).
MAX_COMPREHENSIONS = 4
FILTER_VARIABLES = ("signal", "op")
PREDICATE_VARIABLES = ("result", "op")
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# What a failed evaluation raises (the library's errors are these builtins).
_EVAL_ERRORS = (ValueError, TypeError, KeyError, IndexError, RuntimeError, ArithmeticError)
_POSITION = re.compile(r"<input>:(\d+):(\d+): (.*)")
_UNDEFINED = re.compile(r"Undefined variable or function: '([^']*)'")

Context = dict[str, JsonValue]


@functools.lru_cache(maxsize=CACHE_SIZE)
def program(text: str) -> cel.Program:
    """The compiled program for ``text`` (ValueError if it does not parse)."""
    return cel.compile(text)


def holds(compiled: cel.Program, context: Context) -> bool:
    """True only if ``compiled`` evaluates to true on ``context``."""
    try:
        return compiled.execute(context) is True
    except _EVAL_ERRORS:
        return False


def check(field: str, text: str, max_length: int, probe: Context) -> cel.Program:
    """``text`` compiled, or InvalidArgument naming ``field`` (see the module docstring).

    ``probe`` is a context of the documented variables with representative values.
    """
    if len(text) > max_length:
        raise InvalidArgument(
            field, f"{len(text)} characters exceed max_expression_length ({max_length})"
        )
    _check_cost(field, text)
    try:
        compiled = program(text)
    except ValueError as exc:
        raise InvalidArgument(field, _syntax_message(str(exc))) from None
    try:
        result = compiled.execute(probe)
    except KeyError:
        return compiled  # an absent attribute: the type is known only per signal
    except RuntimeError as exc:
        undefined = _UNDEFINED.search(str(exc))
        if undefined is not None:
            names = " and ".join(probe)
            raise InvalidArgument(
                field,
                f"unknown variable or function {undefined.group(1)[:60]!r} "
                f"(the variables are {names})",
            ) from None
        raise InvalidArgument(field, f"evaluation error: {str(exc)[:100]}") from None
    except TypeError as exc:
        raise InvalidArgument(field, f"type error: {str(exc)[:100]}") from None
    except (ValueError, IndexError, ArithmeticError):
        return compiled  # a value error on the probe's values, not on every signal's
    if not isinstance(result, bool):
        raise InvalidArgument(field, f"must be a bool expression, not {type(result).__name__}")
    return compiled


def _syntax_message(message: str) -> str:
    """The library's parse error as "syntax error at line:column: ...", bounded."""
    found = _POSITION.search(message)
    if found is None:
        return f"syntax error: {message[:100]}"
    line, column, detail = found.groups()
    detail = detail.removeprefix("Syntax error: ")
    return f"syntax error at {line}:{column}: {detail[:100]}"


def _check_cost(field: str, text: str) -> None:
    """Refuse nested comprehensions and more than MAX_COMPREHENSIONS of them.

    A scan of the text outside string literals: ``.NAME(`` with NAME a comprehension
    macro opens a comprehension until its closing parenthesis.
    """
    depth = 0  # open parentheses
    inside: list[int] = []  # depth at which each open comprehension started
    count = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            i = _skip_string(text, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if inside and inside[-1] == depth:
                inside.pop()
            depth -= 1
        elif c == "." and i + 1 < n and (text[i + 1].isalpha() or text[i + 1] == "_"):
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if text[i + 1 : j] in _MACROS and k < n and text[k] == "(":
                line = text.count("\n", 0, i) + 1
                column = i - (text.rfind("\n", 0, i) + 1) + 1
                if inside:
                    raise InvalidArgument(
                        field,
                        f"cost limit at {line}:{column}: a comprehension "
                        f"({text[i + 1 : j]}) inside another is not allowed",
                    )
                count += 1
                if count > MAX_COMPREHENSIONS:
                    raise InvalidArgument(
                        field,
                        f"cost limit at {line}:{column}: more than {MAX_COMPREHENSIONS} "
                        "comprehensions",
                    )
                depth += 1
                inside.append(depth)
                i = k + 1
                continue
            i = j
            continue
        i += 1


def _skip_string(text: str, start: int) -> int:
    """The index just past the string literal opening at ``start`` (the text's end if it
    is unterminated: the parser reports that)."""
    quote = text[start]
    triple = text.startswith(quote * 3, start)
    raw = start > 0 and text[start - 1] in "rR"
    i = start + (3 if triple else 1)
    n = len(text)
    while i < n:
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
    return n
