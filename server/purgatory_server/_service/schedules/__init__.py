"""Recurring schedules: a schedule's next firing is an ordinary operation of its purgatory.

- ``definition``: a schedule validated from the wire, spelled on the wire and in the journal;
- ``timing``: fire times of fixed intervals and cron expressions in a time zone;
- ``table``: the schedules of one purgatory and the one armed occurrence each keeps;
- ``schedule_recovery``: a durable purgatory's schedules back at start-up.

The RPCs are :mod:`purgatory_server._service.api.schedules_rpc`.
"""
