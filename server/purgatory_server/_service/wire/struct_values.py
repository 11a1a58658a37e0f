"""``google.protobuf.Struct`` <-> :class:`~..model.attributes.Attributes`.

A Struct is decoded once, where it arrives (a request, a journal record): its canonical
encoding is the deterministic serialization (map entries in key order), so equal
objects have equal encodings whatever order a client built them in. Pure functions.
"""

from __future__ import annotations

from google.protobuf import struct_pb2

from purgatory_server._service.model.attributes import Attributes, JsonValue

__all__ = ["attributes_from_raw", "attributes_from_struct", "attributes_to_struct"]

_EMPTY_ATTRIBUTES = struct_pb2.Struct()
_EXACT = 2**53


def attributes_from_struct(msg: struct_pb2.Struct) -> Attributes:
    """The attributes a Struct spells (its size is the caller's to check: ``raw``)."""
    return Attributes(msg.SerializeToString(deterministic=True), _object(msg))


def attributes_from_raw(raw: bytes) -> Attributes:
    """The attributes of a canonical encoding (as the journal keeps it)."""
    return attributes_from_struct(struct_pb2.Struct.FromString(raw))


def attributes_to_struct(attributes: Attributes | None) -> struct_pb2.Struct:
    """The Struct to send (an empty one for None)."""
    if attributes is None:
        return _EMPTY_ATTRIBUTES
    return struct_pb2.Struct.FromString(attributes.raw)


def _object(msg: struct_pb2.Struct) -> dict[str, JsonValue]:
    # Iterating the map's keys and indexing it are C calls; its ``items()`` is the
    # pure-Python Mapping mixin's (several times slower).
    fields = msg.fields
    return {key: _value(fields[key]) for key in fields}


def _value(msg: struct_pb2.Value) -> JsonValue:
    """One Value as a JSON value, an integral number within 2**53 as an int (what
    :class:`~..model.attributes.Attributes` holds)."""
    kind = msg.WhichOneof("kind")
    if kind == "number_value":
        number = msg.number_value
        if number.is_integer() and -_EXACT <= number <= _EXACT:
            return int(number)
        return number
    if kind == "string_value":
        return msg.string_value
    if kind == "bool_value":
        return msg.bool_value
    if kind == "struct_value":
        return _object(msg.struct_value)
    if kind == "list_value":
        return [_value(v) for v in msg.list_value.values]
    return None
