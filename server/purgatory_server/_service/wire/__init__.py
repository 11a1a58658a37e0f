"""Protobuf messages <-> the service's values: shared by the edge and the journal codec.

No grpc here, only the generated messages: a durable purgatory spells outcomes and
conditions on disk in the same messages the wire uses, so both go through one converter.

- ``convert``: responses, statuses, events and conditions, typed both ways;
- ``validation``: every request check; anything invalid is INVALID_ARGUMENT naming the field;
- ``field_rules``: the ``check_*`` rules on plain values, shared by requests and stored schedules;
- ``struct_values``: ``google.protobuf.Struct`` <-> attributes;
- ``field_prefixes``: a batch element's field name, built only when an error needs it;
- ``schedule_spec``: a schedule's ``ScheduleSpec``, validated and spelled (RPCs and journal).
"""
