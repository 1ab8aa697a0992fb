"""Prometheus metrics (issue 13): ``/metrics`` of every broker and nameserver, scraped with
urllib and parsed with prometheus_client's own parser, against what was really done."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import defaultdict

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import AuthenticationError, ConfigError, NoPermissionError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand

pytestmark = pytest.mark.integration

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(url: str) -> Samples:
    """Every sample of one scrape, by sample name (``..._total`` for counters)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples: Samples = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name].append((sample.labels, sample.value))
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples carrying ``labels``."""
    return sum(v for found, v in samples.get(name, []) if all(found.get(k) == x for k, x in labels.items()))


def test_counters_match_what_was_sent_while_scraped_under_load() -> None:
    with LocalCluster(brokers=1) as cluster, Admin(cluster.nameserver) as admin:
        assert set(cluster.metrics_urls) == {"nameserver", "broker-a"}
        url = cluster.metrics_urls["broker-a"]
        admin.create_topic("load", 4)
        sent = 0
        done = threading.Event()

        def produce() -> None:
            nonlocal sent
            with Producer(cluster.nameserver) as producer:
                for round_ in range(40):
                    batch = [Message("load", b"x" * 100, queue_id=round_ % 4) for _ in range(250)]
                    sent += sum(r.count for r in producer.send_batch(batch))
                    time.sleep(0.01)  # a load of 40 requests spread over a second, not a burst
            done.set()

        thread = threading.Thread(target=produce)
        thread.start()
        scrapes, seen = 0, []
        while not done.is_set() or scrapes == 0:  # scraped while the load runs, every scrape parses
            seen.append(value(scrape(url), "rocketmq_messages_in_total", topic="load"))
            scrapes += 1
        thread.join()
        assert seen == sorted(seen)  # a counter never goes back
        assert sent == 10_000
        assert [n for n in seen if 0 < n < sent], f"no scrape landed during the load: {seen}"
        samples = scrape(url)
        assert value(samples, "rocketmq_messages_in_total", topic="load", node_id="broker-a") == sent
        assert value(samples, "rocketmq_throughput_in_total", topic="load") > 100 * sent
        sends = value(samples, "rocketmq_rpc_latency_count", protocol_type="remoting", request_code="320")
        assert sends >= 40  # SEND_BATCH_MESSAGE, one observation per request
        assert value(samples, "rocketmq_rpc_latency_bucket", request_code="320", le="+Inf") == sends

        with Consumer(cluster.nameserver) as consumer:
            read = sum(len(r.messages) for q in range(4) for r in consumer.iter_range("load", q, 0))
        samples = scrape(url)
        assert value(samples, "rocketmq_messages_out_total", topic="load") == read == sent
        deadline = time.monotonic() + 10
        while value(scrape(url), "rocketspark_storage_flush_latency_count") == 0:  # flushed every 500 ms
            assert time.monotonic() < deadline, "no flush observed"
            time.sleep(0.1)
        assert 0 < value(samples, "rocketspark_disk_used_ratio") < 1
        assert value(samples, "rocketmq_storage_size") > 100 * sent


def _lags(cluster: LocalCluster, group: str, topic: str) -> dict[tuple[str, int], float]:
    out = {}
    for name in cluster.brokers:
        for labels, lag in scrape(cluster.metrics_urls[name]).get("rocketmq_consumer_lag_messages", []):
            if labels["consumer_group"] == group and labels["topic"] == topic:
                out[(labels["node_id"], int(labels["queue_id"]))] = lag
    return out


def test_lag_matches_admin_progress_on_normal_and_remapped_static_topics() -> None:
    with LocalCluster(brokers=2) as cluster, Admin(cluster.nameserver) as admin:
        admin.create_topic("plain", 2)
        admin.create_static_topic("moving", 2, brokers=["broker-a"])
        with Producer(cluster.nameserver) as producer, Consumer(cluster.nameserver) as consumer:
            for i in range(12):
                producer.send(Message("plain", b"p", queue_id=i % 2))
                producer.send(Message("moving", b"m", queue_id=i % 2))
            consumer.commit_offset("billing", "plain", 0, 2)
            consumer.commit_offset("billing", "moving", 1, 1)
            admin.remap_static_topic("moving", [0], "broker-b")  # a gap of 10,000 offsets follows
            for _ in range(4):
                producer.send(Message("moving", b"after", queue_id=0))
            consumer.commit_offset("billing", "moving", 0, 3)  # committed at the new leader, before the gap

        for topic in ("plain", "moving"):
            progress = admin.consumer_progress("billing", topic)
            expected = {(p.broker_name, p.queue_id): p.lag for p in progress if p.consumer_offset >= 0}
            assert _lags(cluster, "billing", topic) == expected, topic
        assert _lags(cluster, "billing", "moving") == {("broker-b", 0): 3 + 4, ("broker-a", 1): 5}


def test_series_stay_bounded_with_1000_topics() -> None:
    with LocalCluster(brokers=1, broker_config={"register_interval_ms": 600_000}) as cluster:
        url = cluster.metrics_urls["broker-a"]
        with Admin(cluster.nameserver) as admin, Producer(cluster.nameserver) as producer:
            for i in range(1000):
                admin.create_topic(f"t{i}", 1)
            for i in range(1000):
                producer.send(Message(f"t{i}", b"x"))
            first = scrape(url)
            for i in range(0, 1000, 7):
                producer.send(Message(f"t{i}", b"y" * 500))
            again = scrape(url)
            in_series = len(again["rocketmq_messages_in_total"])
            assert in_series <= 1000 + 5  # one per topic (and the system topics), never per message

            def data_series(samples: Samples) -> int:  # request latencies aside: one per (code, outcome) seen
                return sum(len(v) for name, v in samples.items() if not name.startswith("rocketmq_rpc_latency"))

            assert data_series(again) == data_series(first)  # more traffic, no new series
            assert sum(len(v) for v in again.values()) < 4 * 1000 + 500
            admin.delete_topic("t0")
            assert value(scrape(url), "rocketmq_messages_in_total", topic="t0") == 0  # gone with the topic
            assert not [1 for labels, _ in scrape(url)["rocketmq_messages_in_total"] if labels["topic"] == "t0"]


def test_auth_refusals_are_counted_by_reason() -> None:
    with LocalCluster(brokers=1, auth=True) as cluster:
        with (
            Producer(cluster.nameserver, access_key="nobody", secret_key="wrong") as stranger,
            pytest.raises(AuthenticationError),
        ):
            stranger.send(Message("orders", b"x"))
        refused = scrape(cluster.metrics_urls["nameserver"])
        assert value(refused, "rocketspark_auth_refusals_total", reason="authentication") >= 1
        assert value(refused, "rocketspark_auth_refusals_total", reason="permission") == 0
        with Admin(cluster.nameserver, **cluster.client_options) as root:
            root.create_user("etl", "etl-secret-0123456789")
            address = root.brokers()["broker-a"]

        def offset() -> RemotingCommand:  # a request is signed in place: one each
            return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "orders", "queueId": 0})

        with Admin(cluster.nameserver, access_key="etl", secret_key="etl-secret-0123456789") as etl:
            with pytest.raises(NoPermissionError) as denied:
                etl.call(address, offset())  # signed, but granted nothing
            assert not isinstance(denied.value, AuthenticationError)
        with Admin(cluster.nameserver) as anonymous, pytest.raises(AuthenticationError):
            anonymous.call(address, offset())
        broker = scrape(cluster.metrics_urls["broker-a"])
        assert value(broker, "rocketspark_auth_refusals_total", reason="permission") == 1
        assert value(broker, "rocketspark_auth_refusals_total", reason="authentication") >= 1


def test_replica_groups_report_sync_state_set_and_replica_lag() -> None:
    with LocalCluster(brokers=1, replicas=2, broker_config={"in_sync_replicas": 2}) as cluster:
        with Producer(cluster.nameserver, **cluster.client_options) as producer:
            for _ in range(20):
                producer.send(Message("replicated", b"r" * 100))
        ns = scrape(cluster.metrics_urls["nameserver"])
        masters = [
            n for n in ("broker-a-r0", "broker-a-r1") if value(scrape(cluster.metrics_urls[n]), "rocketspark_ha_master")
        ]
        assert len(masters) == 1
        master = scrape(cluster.metrics_urls[masters[0]])
        assert value(master, "rocketspark_ha_sync_state_set_size") == 2
        assert [labels["replica_id"] for labels, _ in master["rocketspark_ha_replica_lag_bytes"]] != []
        assert value(master, "rocketspark_ha_replica_lag_bytes") == 0  # in_sync_replicas = 2: the slave holds all
        assert value(ns, "rocketspark_ha_sync_state_set_size", group="broker-a") == 2


def test_metrics_port_off_or_taken() -> None:
    with LocalCluster(brokers=1, broker_config={"metrics_port": -1}, nameserver_config={"metrics_port": -1}) as cluster:
        assert cluster.metrics_urls == {}
    with LocalCluster(brokers=1) as cluster:
        taken = int(cluster.metrics_urls["broker-a"].rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(ConfigError, match=f"metrics on 127.0.0.1:{taken}.*metrics_port"):
            LocalCluster(brokers=1, broker_config={"metrics_port": taken}).start()
