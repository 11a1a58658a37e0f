"""Workers' placement and configuration, without processes: the cluster's rendezvous
hashing decides, every worker agrees, and a name another worker owns is refused with
UNAVAILABLE naming that worker's own address (the redirect clients follow)."""

from __future__ import annotations

import pytest
from purgatory_server._cluster.placement import ranked
from purgatory_server._service.config.server_config import ConfigError, load_config
from purgatory_server._service.model.errors import METADATA_OWNER, Code, NotOwner
from purgatory_server._service.workers.plan import (
    WORKERS_PER_CORE,
    WorkerPlan,
    max_workers,
    usable_cores,
    worker_config,
    worker_count,
    worker_plan,
)

PORTS = (7000, 7001, 7002, 7003)


def _plan(index: int, count: int = 3) -> WorkerPlan:
    return WorkerPlan(index, "127.0.0.1", PORTS[0], PORTS[1 : count + 1], "127.0.0.1")


def test_the_owner_is_the_clusters_rendezvous_choice_and_all_workers_agree() -> None:
    names = [f"p{i}" for i in range(300)]
    plans = [_plan(i) for i in range(3)]
    for name in names:
        owners = {plan.owner_of(name) for plan in plans}
        assert len(owners) == 1
        expected = ranked(name, ["worker-0", "worker-1", "worker-2"])[0]
        assert f"worker-{owners.pop()}" == expected
        assert sum(plan.owns(name) for plan in plans) == 1
    # Spread: each of 3 workers gets a fair share of 300 names (hashing, not luck).
    counts = [sum(plans[0].owner_of(n) == i for n in names) for i in range(3)]
    assert all(70 <= c <= 130 for c in counts), counts


def test_a_name_owned_elsewhere_is_refused_naming_the_owner() -> None:
    plan = _plan(0)
    mine = next(n for n in (f"n{i}" for i in range(100)) if plan.owns(n))
    theirs = next(n for n in (f"n{i}" for i in range(100)) if not plan.owns(n))
    plan.route(mine, True)  # no error: this worker creates and serves it
    with pytest.raises(NotOwner) as refused:
        plan.route(theirs, False)
    owner = plan.owner_of(theirs)
    assert refused.value.code is Code.UNAVAILABLE
    named = dict(refused.value.trailing_metadata())[METADATA_OWNER]
    assert named == f"127.0.0.1:{PORTS[1 + owner]}"
    assert plan.peers() == ["127.0.0.1:7002", "127.0.0.1:7003"]


def test_workers_option_auto_and_what_it_refuses() -> None:
    assert load_config(env={}).workers == 1  # the default: one process, as before
    assert worker_count(load_config(env={}, overrides={"workers": 0})) == usable_cores()
    assert load_config(env={"PURGATORY_WORKERS": "3"}).workers == 3
    with pytest.raises(ConfigError, match="workers must be >= 0"):
        load_config(env={}, overrides={"workers": -1})
    with pytest.raises(ConfigError, match="cluster"):
        worker_count(
            load_config(env={}, overrides={"workers": 2, "cluster": {"nats_urls": ["nats://x"]}})
        )
    with pytest.raises(ConfigError, match="TLS"):
        worker_count(load_config(env={}, overrides={"workers": 2, "tls_cert": "c", "tls_key": "k"}))


def test_workers_are_capped_per_usable_core() -> None:
    cap = WORKERS_PER_CORE * usable_cores()
    assert max_workers() == cap
    assert worker_count(load_config(env={}, overrides={"workers": cap})) == cap
    with pytest.raises(ConfigError, match=rf"workers: {cap + 1} is more than {cap}, "):
        worker_count(load_config(env={}, overrides={"workers": cap + 1}))


def test_a_worker_plan_and_its_share_of_the_memory_budget() -> None:
    config = load_config(env={}, overrides={"listen": "0.0.0.0:5000", "workers": 2})
    plan = worker_plan(config, 1, "5000,5001,5002")
    assert (plan.index, plan.shared_port, plan.own_ports) == (1, 5000, (5001, 5002))
    assert plan.advertise not in ("0.0.0.0", "")  # a wildcard is not dialable
    with pytest.raises(ConfigError):
        worker_plan(config, 2, "5000,5001,5002")
    assert worker_config(config, 2).limits.memory_budget_percent == 25
    sized = load_config(env={}, overrides={"limits": {"memory_budget_bytes": 64 << 20}})
    assert worker_config(sized, 4).limits.memory_budget_bytes == 16 << 20
