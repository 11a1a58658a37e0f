"""Replicated purgatories on NATS JetStream (issue 14; design in docs/scale-out.md).

Small modules, one concept each:

- :mod:`.server_config`: the ``[cluster]`` table (imports nothing from NATS);
- :mod:`.loader`: builds the node only when ``[cluster]`` asks for it;
- :mod:`.setup`: creates the streams and buckets at start-up;
- :mod:`.layout`: streams, subjects and keys of a purgatory;
- :mod:`.log`: the fenced, group-committed append of an owner's journal records;
- :mod:`.shadow`: a standby's journal state, tailed from the stream;
- :mod:`.lease`: the owner lease in a KV bucket with a TTL;
- :mod:`.store`: the durable store of an owned purgatory over its replicated log;
- :mod:`.node`: the standby -> takeover -> owner -> evicted cycle and routing;
- :mod:`.errors`: UNAVAILABLE with the owner's address in trailing metadata;
- :mod:`.natsd`: a local three-node nats-server cluster (tests, ``make cluster``, bench);
- :mod:`.local`: ``make cluster`` (NATS plus two purgatory servers, foreground).

Only :mod:`.server_config` is imported by the service core; the rest is imported when a
configuration names ``[cluster] nats_urls`` (the ``cluster`` extra: ``nats-py``).
"""
