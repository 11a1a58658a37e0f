"""Worker groups: competing consumers of a purgatory's outcomes (docs/service.md).

- :mod:`.group_config`: a group's settings and their bounds;
- :mod:`.selection`: its delivery selection (priorities, ordering keys, a rate limit),
  checked and spelled (wire and journal);
- :mod:`.priority`: priority rules; :mod:`.ordering`: ordering keys and their queues;
  :mod:`.rate_limit`: the sliding-window rate limiter;
- :mod:`.selector`: a selecting group's ready entries and which goes next;
- :mod:`.backoff`: a group's retry backoff (the wait before an unacked outcome's next offer);
- :mod:`.batch`: one entry of a batch of acks and nacks, and its answer;
- :mod:`.entry`: one held outcome and its state (ready, leased, dead);
- :mod:`.lease`: a lease's expiry as a timing-wheel task;
- :mod:`.member`: one connected member (a Subscribe stream) and its deliveries;
- :mod:`.group`: one group: intake, dispatch, ack, nack, extend, expiry, dead letters;
- :mod:`.manager`: a purgatory's groups, their limits and the expiry hand-off;
- :mod:`.records`: a group's changes as journal records (rebuilt by
  :mod:`purgatory_server._service.durable.restored_groups`).

The RPCs are :mod:`purgatory_server._service.api.groups_rpc`.
"""

from purgatory_server._service.groups.group import WorkerGroup
from purgatory_server._service.groups.group_config import GroupConfig
from purgatory_server._service.groups.manager import GroupSet
from purgatory_server._service.groups.member import Delivery, GroupMember

__all__ = ["Delivery", "GroupConfig", "GroupMember", "GroupSet", "WorkerGroup"]
