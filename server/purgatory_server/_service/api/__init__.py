"""The gRPC edge: the only package that imports grpc (with the app assembly in it).

Each RPC arrives at :mod:`.edge`, runs in :mod:`.servicer`, which hands each unary RPC on
a purgatory to its feature's ``*_rpc`` handler through :mod:`.answer`, and ends with the
status :mod:`.status_mapping` gives a service error. Everything below the edge is plain
Python on the event loop.

- ``app``: server assembly (servicer, health, reflection), start and graceful shutdown;
- ``edge``: method handlers around the servicer: decoding, authentication, last resort;
- ``servicer``: the PurgatoryService RPCs: admin, one line per unary RPC, the streams;
- ``answer``: look up the purgatory, run the RPC's handler, await the journal barrier;
- ``operations_rpc``: register (long-poll), signal, force-complete, look up, cancel, reschedule;
- ``session_rpc``: the bidirectional Session stream (reader, acknowledgements, writer);
- ``session_outbound``: a Session's outbound half: what it owes, its bound, the writer;
- ``session_resume``: named Sessions parked for a resume, and the cap on sessions;
- ``session_messages``: how a Session packs acknowledgements and outcomes, its heartbeat;
- ``event_cache``: each outcome encoded once for all the Subscribe streams that send it;
- ``listing_rpc``, ``schedules_rpc``, ``groups_rpc``, ``group_acks_rpc``: the feature
  RPCs' handlers (``group_acks_rpc``: a group's Nack and AckBatch);
- ``backoff_wire``: a worker group's retry backoff on the wire, checked;
- ``status_mapping``: service errors as gRPC statuses with ``google.rpc`` details;
- ``rpc_telemetry``: RPC metrics and a server span around each method;
- ``tls``: server credentials from PEM files;
- ``listen``: the listen address, parsed and checked before gRPC binds it;
- ``stream_slots``: caps on open Subscribe streams per server and per connection;
- ``worker_listing``: ListPurgatories of all workers when the server runs several;
- ``admission``: the event loop's lateness, and bulk requests shed while it runs late;
- ``write_turns``: stream writes started per loop turn (many streams, one loop).
"""
