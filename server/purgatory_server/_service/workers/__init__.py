"""Several worker processes behind one address (``workers``; docs/service.md, "Workers").

One process serves on one event loop, so on one core. With ``workers = N`` a grpc-free
supervisor starts N ordinary servers, each owning the purgatories rendezvous hashing
places on it; they share the listening port (SO_REUSEPORT) and each also listens on its
own, which a worker names when it refuses a purgatory it does not own (UNAVAILABLE with
``purgatory-owner``, as a cluster's standby does), so clients need no change.

- ``plan``: a worker's view: the workers, their ports, who owns a name, the refusal;
- ``supervisor``: reserves the ports, starts the workers, restarts a dead one, stops all;
- ``metrics_gather``: the whole server's Prometheus endpoint, every worker's series merged;
- ``kept_purgatories``: purgatories created at run time, kept by the supervisor so a restarted
  worker creates them again.
"""
