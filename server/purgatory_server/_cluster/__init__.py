"""Replicated purgatories on NATS JetStream (design in docs/scale-out.md).

Small modules, one concept each:

- :mod:`.node_loader`: builds the node only when ``[cluster]`` asks for it;
- :mod:`.jetstream_setup`: creates the streams and buckets at start-up;
- :mod:`.layout`: streams, subjects and keys of a purgatory;
- :mod:`.log`: the fenced, group-committed append of an owner's journal records;
- :mod:`.shadow`: a standby's journal state, tailed from the stream;
- :mod:`.snapshot`, :mod:`.snapshot_writer`: a subject's snapshots; when the owner writes one;
- :mod:`.owner_lease`: the owner lease in a KV bucket with a TTL;
- :mod:`.holder`: an owner renewing its lease, retried within the lease, until lost;
- :mod:`.key_view`: what a standby saw of a lease key, and whether it may create it now;
- :mod:`.membership`, :mod:`.placement`: live members, and which of them should own what;
- :mod:`.store`: the durable store of an owned purgatory over its replicated log;
- :mod:`.node`: the standby -> takeover -> owner -> evicted cycle and routing;
- :mod:`.takeover`: the fence that shuts the old owner out, and the kept incarnation;
- :mod:`.tombstone`: deleted purgatories stay deleted;
- :mod:`.natsd`: a local three-node nats-server cluster (tests, ``make cluster``, bench);
- :mod:`.local`: ``make cluster`` (NATS plus two purgatory servers, foreground).

The ``[cluster]`` table is :mod:`purgatory_server._service.config.cluster_config`, and
the UNAVAILABLE that routes to the owner is ``NotOwner`` in the service's errors
(:mod:`purgatory_server._service.model.errors`). The service imports only
:mod:`.node_loader`; the rest only when a configuration names ``[cluster] nats_urls`` (the
``cluster`` extra: ``nats-py``).
"""
