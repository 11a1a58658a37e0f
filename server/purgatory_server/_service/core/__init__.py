"""Named purgatories and their operations: the service's state, loop-confined, and its
composition (a purgatory built with its table, feed, groups and schedules).

- ``registry``: the purgatories of one server by name (create, delete, evict, shutdown);
- ``named_purgatory``: one purgatory: register, signal, force-complete, cancel, reschedule;
- ``operation``: the DelayedOperation whose condition arrives over the wire;
- ``operation_table``: pending operations and the memory of finished ones, by id;
- ``finished_ids``: the dedup window, finished ids remembered for a time within a byte cap;
- ``progress``: the signals an operation has received, judged against its condition;
- ``match_index``: which pending operations a signal's ``match`` attribute concerns;
- ``latest_values``: the bounded latest value signalled on each key;
- ``signal_data``: signal data accumulated by operations: stored once, shared by operations;
- ``budget``: the server's memory budget in bytes, each purgatory's share of it;
- ``listing``, ``sorted_ids``: ListOperations' filter and cursor over ordered ids;
- ``deadlines``: a pending operation's deadline moves (Reschedule; a re-send's debounce);
- ``snapshots``: a purgatory's figures for the admin RPCs and exporters;
- ``journal_hooks``: what a purgatory tells its journal (a durable store implements it).

The values these share with every layer (errors, conditions, definitions, outcomes,
sizes) are :mod:`purgatory_server._service.model`.
"""
