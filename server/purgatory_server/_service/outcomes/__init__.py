"""Everything that happens to an operation once it ended: the feed owns it.

- ``inbox``: completed operations handed from engine threads to the loop, in batches;
- ``publisher``: the loop side of the inbox: feed first, then the ended-batch listeners;
- ``feed``: the one owner: sequence, retained window, journal record, delivery;
- ``event_log``: outcomes, their per-purgatory sequence and the retained window;
- ``subscriptions``: Subscribe streams' bounded buffers;
- ``stream_queue``: the queue a server stream drains (subscribers, group members);
- ``incarnation``: which life of a purgatory's event stream a sequence belongs to.
"""
