"""Recurring schedules: a schedule's next firing is an ordinary operation of its purgatory.

- ``definition``: a schedule's definition and the occurrence operations it arms;
- ``timing``: fire times of fixed intervals and cron expressions in a time zone;
- ``table``: the schedules of one purgatory and the one armed occurrence each keeps.

On the wire: :mod:`purgatory_server._service.wire.schedule_spec`; in the journal:
:mod:`purgatory_server._service.durable.schedule_records`; the RPCs:
:mod:`purgatory_server._service.api.schedules_rpc`.
"""
