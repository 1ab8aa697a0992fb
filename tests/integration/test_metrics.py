"""Prometheus metrics (issue 13): ``/metrics`` of every broker and nameserver, scraped with
urllib and parsed with prometheus_client's own parser, against what was really done."""

from __future__ import annotations

import base64
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.errors import AuthenticationError, ConfigError, NoPermissionError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from tests.helpers import eventually

pytestmark = pytest.mark.integration

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(url: str, headers: dict[str, str] | None = None, context: ssl.SSLContext | None = None) -> Samples:
    """Every sample of one scrape, by sample name (``..._total`` for counters)."""
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
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
        sends = value(
            samples, "rocketmq_rpc_latency_count", protocol_type="remoting", request_code="send_batch_message"
        )
        assert sends >= 40  # one observation per request
        assert value(samples, "rocketmq_rpc_latency_bucket", request_code="send_batch_message", le="+Inf") == sends

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
        refused = scrape(cluster.metrics_urls["nameserver"], cluster.metrics_headers)
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
        broker = scrape(cluster.metrics_urls["broker-a"], cluster.metrics_headers)
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


def refused_scrape(url: str, headers: dict[str, str], context: ssl.SSLContext | None = None) -> tuple[int, str, str]:
    """Status, WWW-Authenticate and body of a scrape that must be refused."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10, context=context)
    return refused.value.code, refused.value.headers.get("WWW-Authenticate", ""), refused.value.read().decode()


def basic(access_key: str, secret_key: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{access_key}:{secret_key}".encode()).decode()}


def test_with_auth_on_metrics_want_the_bearer_token_over_tls(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(brokers=1, auth=True, tls=True)
    trusted = ssl.create_default_context(cafile=cluster.tls_ca_file)
    assert cluster.metrics_token and cluster.metrics_headers == {"Authorization": f"Bearer {cluster.metrics_token}"}
    for name, url in cluster.metrics_urls.items():
        assert url.startswith("https://"), name
        status, challenge, body = refused_scrape(url, {}, trusted)  # as anyone could before: refused
        assert (status, challenge) == (401, 'Bearer realm="rocketspark metrics"'), name
        assert body.count("\n") == 1 and "Authorization: Bearer <token>" in body and "metrics_token" in body
        status, challenge, body = refused_scrape(url, {"Authorization": "Bearer not-the-token"}, trusted)
        assert status == 401 and 'error="invalid_token"' in challenge and body.startswith("wrong metrics token")
        assert (
            refused_scrape(url, basic(cluster.admin_access_key or "", cluster.admin_secret_key or ""), trusted)[0]
            == 401
        )
        samples = scrape(url, cluster.metrics_headers, trusted)
        assert value(samples, "rocketspark_scrape_refusals_total", reason="credentials") == 3, name
        assert value(samples, "rocketspark_scrape_refusals_total", reason="permission") == 0
    assert "refused a scrape of /metrics from 127.0.0.1 (401)" in (cluster.data_dir / "broker-a.log").read_text()


def scrape_unless_forbidden(url: str, headers: dict[str, str]) -> Samples | None:
    try:
        return scrape(url, headers)
    except urllib.error.HTTPError as refused:
        assert refused.code == 403, refused.code
        return None


def test_basic_auth_takes_a_cluster_user_allowed_get_on_cluster(make_cluster: Callable[..., LocalCluster]) -> None:
    basic_auth = {"metrics_auth": "basic"}
    cluster = make_cluster(brokers=1, auth=True, broker_config=basic_auth, nameserver_config=basic_auth)
    assert cluster.metrics_headers == {}  # no token: scrapers sign in as a user
    urls = list(cluster.metrics_urls.values())
    with Admin(cluster.nameserver, **cluster.client_options) as admin:
        admin.create_user("prometheus", "prometheus-secret-0123")
        for url in urls:
            status, challenge, body = refused_scrape(url, {})
            assert (status, challenge) == (401, 'Basic realm="rocketspark metrics", charset="UTF-8"')
            assert "basic auth" in body and "Get or List on Cluster" in body
            status, _, body = refused_scrape(url, basic("prometheus", "a-wrong-secret-0123"))
            assert status == 401 and body.startswith('unknown access key "prometheus" or wrong secret key')
            assert "a-wrong-secret" not in body
            status, challenge, body = refused_scrape(url, basic("prometheus", "prometheus-secret-0123"))
            assert (status, challenge) == (403, "")
            assert body.startswith('user "prometheus" lacks Get or List on Cluster: grant it with')
        admin.set_acl("prometheus", "Cluster", ["Get"])
    for url in urls:  # every server took the new policy
        samples = eventually(
            lambda url=url: scrape_unless_forbidden(url, basic("prometheus", "prometheus-secret-0123"))
        )
        assert value(samples, "rocketspark_scrape_refusals_total", reason="credentials") == 2
        assert value(samples, "rocketspark_scrape_refusals_total", reason="permission") >= 1
        assert scrape(url, basic(cluster.admin_access_key or "", cluster.admin_secret_key or ""))  # a super user


def test_a_bearer_token_protects_metrics_without_auth(make_cluster: Callable[..., LocalCluster]) -> None:
    bearer = {"metrics_auth": "bearer"}
    cluster = make_cluster(brokers=1, broker_config=bearer, nameserver_config=bearer)
    assert not cluster.auth and cluster.metrics_token
    for url in cluster.metrics_urls.values():
        assert refused_scrape(url, {})[0] == 401
        assert scrape(url, cluster.metrics_headers)
