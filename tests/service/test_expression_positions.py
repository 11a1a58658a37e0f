"""A type error in a condition's expression is answered with its line:column: the
library gives none, so the service finds it by evaluating the text's parts
(model/expression_positions.py)."""

from __future__ import annotations

import pytest
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.model.expression_positions import locate, position
from purgatory_server._service.model.expressions import PROBES, check


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('signal.amount + "x" > 0', "type error at 1:15: '+' between int and string"),
        ('signal.amount > "a"', "type error at 1:15: '>' between int and string"),
        ('signal.amount - 1 + "z" == 0', "type error at 1:19: '+' between int and string"),
        ('(signal.amount + "a") == 1', "type error at 1:16: '+' between int and string"),
        (
            'signal.key == "k" ||\n  signal.amount * "2" == 1',
            "type error at 2:17: '*' between int and string",
        ),
        ("signal.key in 1", "type error at 1:12: 'in' between string and int"),
        ("!signal.amount", "type error at 1:1: '!' on int"),
        ("-signal.key == 1", "type error at 1:1: '-' on string"),
        ("signal.amount ? true : false", "type error at 1:15: '?' on int, not bool"),
        ("size(signal.amount) > 1", "type error at 1:1: size() has no overload for (int)"),
        (
            "signal.source.startsWith(1)",
            "type error at 1:15: startsWith() has no overload for (string, int)",
        ),
        (
            'signal.key == "" && int(signal.key + 1) > 0',
            "type error at 1:36: '+' between string and int",
        ),
        # Brackets and operators inside string literals are not the text's own.
        (
            'signal.key.startsWith(")") || size(signal.amount) > 0',
            "type error at 1:31: size() has no overload for (int)",
        ),
        (
            'signal.key + "+(" != "" && signal.amount + "a" == 1',
            "type error at 1:42: '+' between int and string",
        ),
        # A '-' in a string or a sign is no operator; the error is the '+' after them.
        ('signal.key != "a-b" && -1 + "c" == 0', "type error at 1:27: '+' between int and string"),
    ],
)
def test_a_type_error_names_its_position(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check("condition.filter", text, 1024, "filter")
    assert caught.value.field == "condition.filter"
    assert caught.value.problem == message


def test_a_predicates_type_error_names_its_position() -> None:
    with pytest.raises(InvalidArgument) as caught:
        check("condition.predicate", 'result.amount_sum >= "10"', 1024, "predicate")
    assert caught.value.problem == "type error at 1:19: '>=' between int and string"


def test_the_search_is_bounded_and_then_names_no_position() -> None:
    # 250 operands: more parts than the search's budget compiles.
    text = " + ".join(["1"] * 250) + ' + "x" == 1'
    with pytest.raises(InvalidArgument) as caught:
        check("condition.filter", text, 1024, "filter")
    assert caught.value.problem == "type error: no overload for the operand types"


def test_nothing_is_located_in_a_text_that_does_not_fail() -> None:
    probe = PROBES["filter"]
    assert locate('signal.key == "a" && signal.amount >= 0', probe) is None
    # false && <error> is false in CEL: the probe finds no type error there.
    assert locate('signal.key == "x" && signal.amount + "a" == 1', probe) is None


def test_position_counts_lines_and_columns_from_one() -> None:
    assert position("ab\ncd", 0) == "1:1"
    assert position("ab\ncd", 4) == "2:2"
