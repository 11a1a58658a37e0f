"""Durability through one journal interface: hooks, store, codec, catalog.

- ``hooks``: what a purgatory tells its journal; the in-memory default does nothing;
- ``local_store``: the hooks over the journal library, recovery at start-up, life cycle;
- ``codec``: the service's values <-> journal records;
- ``catalog``: durable purgatories found again under the data directory;
- ``downtime``: the order operations that fell due while the server was down re-arm in.
"""
