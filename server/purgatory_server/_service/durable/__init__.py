"""Durability: the core's journal hooks implemented over the journal library.

- ``local_store``: the hooks over a local journal, recovery at start-up, life cycle;
- ``codec``: the service's values <-> journal records;
- ``schedule_records``: a schedule's journal records (upserted, deleted);
- ``restored_groups``: a durable purgatory's worker groups rebuilt from the journal;
- ``schedule_recovery``: a durable purgatory's schedules back at start-up;
- ``catalog``: durable purgatories found again under the data directory;
- ``downtime``: the order operations that fell due while the server was down re-arm in.

The protocol itself (``JournalHooks``) belongs to its caller,
:mod:`purgatory_server._service.core.journal_hooks`.
"""
