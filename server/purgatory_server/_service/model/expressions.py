"""Conditions' CEL expressions: compiled once per distinct text, checked, evaluated.

The library is ``common-expression-language`` (the ``cel`` module: Rust bindings; chosen
by measurement against ``cel-python``, docs/benchmarks.md §25). Expressions are untrusted
input, so :func:`check` refuses at registration (:class:`~.errors.InvalidArgument`
naming the field and, where the library gives one, the line:column):

- a text longer than ``max_expression_length`` or that does not parse;
- one over the **cost limit**: CEL has no loops and no recursion, only the comprehension
  macros (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) iterate, each over a
  value bounded by ``max_attributes_bytes`` or the text itself; a comprehension inside
  another (whose cost would multiply) or more than :data:`MAX_COMPREHENSIONS` of them is
  refused, so one evaluation is linear in its inputs. The library has no ``cel.bind``;
- a name outside the documented variables, a type error (its line:column found by
  :mod:`.expression_positions`) or a non-bool result found by a **probe** evaluation
  (empty attributes, zero numbers, empty strings: :data:`PROBES`), where that
  evaluation is not cut short by an absent attribute. The verdict depends on
  the text alone, so it is cached with the program.

The library's programs have no side effects (no I/O, no clock, no host functions: none
is registered) and read only the context they are given. :func:`holds` is the one way
to evaluate: an error or a non-bool counts as false. Converting Python values into the
library's is most of an evaluation's cost, so an operation binds its own variable once
(:func:`bind`), each evaluation adds only the variable that changes, and each variable
holds only the fields the text reads (:func:`reads`, :func:`project`).

The compile cache (:func:`program`, :func:`gate_programs` for an operation's gate, and
:func:`_verdict` for the checks) is a bounded memo of a pure function, like ``re``'s:
the same text always compiles to an equivalent program. Thread-safe (``lru_cache``).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import cel

from purgatory_server._service.model.attributes import JsonValue
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.model.expression_positions import (
    locate,
    position,
    skip_string,
)

__all__ = [
    "BUILTINS",
    "CACHE_SIZE",
    "MAX_COMPREHENSIONS",
    "PROBES",
    "WHOLE",
    "Context",
    "GatePrograms",
    "Reads",
    "Whole",
    "bind",
    "check",
    "gate_programs",
    "holds",
    "holds_with",
    "program",
    "project",
    "reads",
]

# Distinct expression texts kept compiled.
CACHE_SIZE = 4096
# Comprehension macros per expression (none may nest in another).
MAX_COMPREHENSIONS = 4
# The probe contexts (module docstring): representative values of the documented
# variables, none of them the operation's own, so a verdict holds for every operation.
_PROBE_OP: dict[str, JsonValue] = {"id": "", "keys": [], "attributes": {}}
PROBES: dict[str, Context] = {
    "filter": {
        "signal": {"key": "", "amount": 0, "value": 0, "source": "", "attributes": {}},
        "op": _PROBE_OP,
    },
    "predicate": {
        "result": {
            "signal_count": 0,
            "sources": [],
            "signalled_keys": [],
            "amount_sum": 0,
            "values": {},
        },
        "op": _PROBE_OP,
    },
}
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# The library's functions (CEL's standard ones it implements): one of these reported as
# undefined was called with argument types it has no overload for.
BUILTINS = frozenset(
    {
        *("size", "int", "uint", "double", "string", "bytes", "timestamp", "duration"),
        *("type", "dyn", "contains", "startsWith", "endsWith", "matches"),
        *("getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek"),
        *("getDayOfYear", "getHours", "getMinutes", "getSeconds", "getMilliseconds"),
    }
)
# What a failed evaluation raises (the library's errors are these builtins).
_EVAL_ERRORS = (ValueError, TypeError, KeyError, IndexError, RuntimeError, ArithmeticError)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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


class Whole:
    """The marker of a value an expression may read as a whole (see :func:`reads`)."""

    __slots__ = ()


WHOLE = Whole()
# What an expression reads of a variable: field -> what it reads of that field.
Reads = dict[str, "Reads | Whole"]


@functools.lru_cache(maxsize=CACHE_SIZE)
def reads(text: str, variable: str) -> Reads | Whole:
    """What ``text`` may read of ``variable``: the tree of the field paths it names
    (``signal.attributes.id`` -> {"attributes": {"id": WHOLE}}), or WHOLE where it uses
    the variable otherwise (alone, indexed, a method on it). Conservative: a name in a
    string literal or a comprehension variable of the same name only reads more."""
    tree: Reads = {}
    for found in _IDENTIFIER.finditer(text):
        start = found.start()
        if found.group() != variable:
            continue
        if start and (text[start - 1] == "." or text[start - 1].isalnum()):
            continue  # a field or part of another name, not the variable
        path: list[str] = []
        i = found.end()
        while True:
            j = _skip_spaces(text, i)
            if text[j : j + 1] != ".":
                break
            field = _IDENTIFIER.match(text, _skip_spaces(text, j + 1))
            if field is None:
                break
            if text[_skip_spaces(text, field.end()) : _skip_spaces(text, field.end()) + 1] == "(":
                break  # a method on the value read so far
            path.append(field.group())
            i = field.end()
        if not path:
            return WHOLE
        node = tree
        for name in path[:-1]:
            child = node.get(name)
            if isinstance(child, Whole):
                break
            if child is None:
                child = node[name] = {}
            node = child
        else:
            node[path[-1]] = WHOLE
    return tree


def project(value: JsonValue, read: Reads | Whole) -> JsonValue:
    """The part of ``value`` that ``read`` names (absent fields stay absent)."""
    if isinstance(read, Whole) or not isinstance(value, dict):
        return value
    return {name: project(value[name], sub) for name, sub in read.items() if name in value}


def _skip_spaces(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


class GatePrograms(NamedTuple):
    """A gate's compiled expressions and what each reads (see :func:`gate_programs`)."""

    filter: cel.Program | None
    signal_reads: Reads | Whole
    predicate: cel.Program | None
    result_reads: Reads | Whole
    # What either expression reads of ``op`` (an empty tree: nothing, so no binding).
    op_reads: Reads | Whole


@functools.lru_cache(maxsize=CACHE_SIZE)
def gate_programs(filter_text: str, predicate_text: str) -> GatePrograms:
    """The programs of a gate's (checked) texts, "" for none; one lookup per operation."""
    return GatePrograms(
        program(filter_text) if filter_text else None,
        reads(filter_text, "signal"),
        program(predicate_text) if predicate_text else None,
        reads(predicate_text, "result"),
        reads(filter_text + " " + predicate_text, "op"),
    )


def bind(variables: Context) -> cel.Context:
    """A library context holding ``variables``, converted once (JSON values only: the
    library would register a callable as a function)."""
    bound = cel.Context()
    for name, value in variables.items():
        bound.add_variable(name, value)
    return bound


def holds_with(compiled: cel.Program, bound: cel.Context, name: str, value: JsonValue) -> bool:
    """:func:`holds` on ``bound`` with ``name`` set to ``value`` for this evaluation
    (cleared after it, so ``bound`` keeps nothing of it)."""
    bound.add_variable(name, value)
    try:
        return compiled.execute(bound) is True
    except _EVAL_ERRORS:
        return False
    finally:
        bound.add_variable(name, None)


def check(field: str, text: str, max_length: int, kind: str) -> cel.Program:
    """``text`` compiled, or InvalidArgument naming ``field`` (see the module docstring).

    ``kind`` is "filter" or "predicate": which variables the probe binds
    (:data:`PROBES`). The verdict depends on the text and the kind alone, so it is kept
    with the compiled programs (:func:`_verdict`).
    """
    if len(text) > max_length:
        raise InvalidArgument(
            field, f"{len(text)} characters exceed max_expression_length ({max_length})"
        )
    verdict = _verdict(text, kind)
    if isinstance(verdict, str):
        raise InvalidArgument(field, verdict)
    return verdict


@functools.lru_cache(maxsize=CACHE_SIZE)
def _verdict(text: str, kind: str) -> cel.Program | str:
    """The program for ``text``, or why it is refused (the message after the field)."""
    try:
        return _checked(text, PROBES[kind])
    except InvalidArgument as exc:
        return exc.problem


def _checked(text: str, probe: Context) -> cel.Program:
    """The checks past the length; InvalidArgument (its field unused) on a refusal."""
    field = ""
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
        if undefined is not None and undefined.group(1) in BUILTINS:
            # The library says "undefined" of a function called with the wrong types.
            raise InvalidArgument(field, _type_error(text, probe)) from None
        if undefined is not None:
            names = " and ".join(probe)
            raise InvalidArgument(
                field,
                f"unknown variable or function {undefined.group(1)[:60]!r} "
                f"(the variables are {names})",
            ) from None
        raise InvalidArgument(field, f"evaluation error: {str(exc)[:100]}") from None
    except TypeError:
        raise InvalidArgument(field, _type_error(text, probe)) from None
    except (ValueError, IndexError, ArithmeticError):
        return compiled  # a value error on the probe's values, not on every signal's
    if not isinstance(result, bool):
        raise InvalidArgument(field, f"must be a bool expression, not {type(result).__name__}")
    return compiled


def _type_error(text: str, probe: Context) -> str:
    """A type error's message, with its position (:mod:`.expression_positions`)."""
    located = locate(text, probe)
    if located is None:
        return "type error: no overload for the operand types"
    offset, what = located
    return f"type error at {position(text, offset)}: {what}"


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
            i = skip_string(text, i, n)
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
                at = position(text, i)
                if inside:
                    raise InvalidArgument(
                        field,
                        f"cost limit at {at}: a comprehension "
                        f"({text[i + 1 : j]}) inside another is not allowed",
                    )
                count += 1
                if count > MAX_COMPREHENSIONS:
                    raise InvalidArgument(
                        field,
                        f"cost limit at {at}: more than {MAX_COMPREHENSIONS} comprehensions",
                    )
                depth += 1
                inside.append(depth)
                i = k + 1
                continue
            i = j
            continue
        i += 1
