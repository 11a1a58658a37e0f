"""Named purgatories and their operations: the service's state, loop-confined.

- ``registry``: the purgatories of one server by name (create, delete, evict, shutdown);
- ``named_purgatory``: one purgatory: register, signal, force-complete, cancel, reschedule;
- ``operation``: the DelayedOperation whose condition arrives over the wire;
- ``operation_table``: pending operations and the memory of finished ones, by id;
- ``finished_ids``: the dedup window, finished ids remembered for a time within a byte cap;
- ``conditions``: declarative conditions and the progress they are judged on;
- ``latest_values``: the bounded latest value signalled on each key;
- ``signal_data``: signal data accumulated by operations: stored once, shared by operations;
- ``budget``: the server's memory budget in bytes, each purgatory's share of it;
- ``sizes``: what an operation or a retained outcome costs in memory (the charges);
- ``admission``: the event loop's lateness, and bulk requests shed while it runs late;
- ``write_turns``: stream writes started per loop turn (many streams, one loop);
- ``listing``, ``sorted_ids``: ListOperations' filter and cursor over ordered ids;
- ``deadlines``: a pending operation's deadline moves (Reschedule; a re-send's debounce);
- ``operation_state``: the states, numbered as the wire enum;
- ``snapshots``: a purgatory's figures for the admin RPCs and exporters;
- ``errors``: plain service errors, each naming its status code (no grpc);
- ``quoting``: bounded quoting of caller values in error messages.
"""
