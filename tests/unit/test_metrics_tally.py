"""The request latency tally (``rocketspark.metrics.tally``) and the ``rocketmq_rpc_latency``
family a scrape makes of it: the same exposition prometheus_client's own histogram writes."""

from __future__ import annotations

import random
import time

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.openmetrics.exposition import generate_latest

from rocketspark.metrics.node import RPC_LATENCY, RPC_LATENCY_BUCKETS_MS, Node, NodeMetrics
from rocketspark.metrics.tally import Tally

NODE = Node("c", "broker", "broker-a")


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``rocketmq_rpc_latency`` but ``_created``, by name and labels."""
    out = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name.startswith(RPC_LATENCY) and not sample.name.endswith("_created"):
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_a_value_counts_in_the_first_bucket_it_does_not_exceed() -> None:
    tally = Tally([1, 3, 5])
    for value in (0.0, 1.0, 1.5, 3.0, 4.99, 5.0, 5.01, 1e9):
        tally.observe(("remoting", 10, 0), value)
    [(key, cumulative, total, _)] = tally.snapshot()
    assert key == ("remoting", 10, 0)
    assert cumulative == [2, 4, 6, 8]  # le 1, 3, 5, +Inf: cumulative, the last the count
    assert total == sum((0.0, 1.0, 1.5, 3.0, 4.99, 5.0, 5.01, 1e9))


def test_the_scraped_family_is_what_prometheus_clients_histogram_writes() -> None:
    rng = random.Random(7)
    metrics = NodeMetrics(NODE)
    reference_registry = CollectorRegistry(auto_describe=False)
    reference = Histogram(
        RPC_LATENCY,
        "Time to serve a request, in milliseconds, by protocol, request code and response code",
        [*NODE.names, "protocol_type", "request_code", "response_code"],
        buckets=RPC_LATENCY_BUCKETS_MS,
        registry=reference_registry,
    )
    kinds = [("remoting", 10, 0, "send_message", "success"), ("remoting", 11, 1, "pull_message", "system_error")]
    kinds.append(("grpc", "SendMessage", "OK", "send_message", "ok"))
    for _ in range(2000):
        protocol, code, response, request_label, response_label = rng.choice(kinds)
        value = rng.choice([0.5, 1.0, 2.0, 3.0, 7.0, 10.0, 50.0, 3000.0, 4000.0, rng.uniform(0, 5000)])
        metrics.latency.observe((protocol, code, response), value)
        reference.labels(*NODE.values, protocol, request_label, response_label).observe(value)
    ours, theirs = samples(metrics.registry), samples(reference_registry)
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        assert abs(ours[key] - value) <= 1e-6 * max(1.0, abs(value)), key
    text = generate_latest(metrics.registry).decode()
    assert text.count(f"{RPC_LATENCY}_created{{") == len(kinds)


def test_codes_that_name_the_same_request_are_one_series() -> None:
    metrics = NodeMetrics(NODE)
    metrics.latency.observe(("remoting", 10, 0), 2.0)
    metrics.latency.observe(("remoting", "send_message", 0), 4.0)  # the same request by name
    counts = {labels: value for (name, labels), value in samples(metrics.registry).items() if name.endswith("_count")}
    assert list(counts.values()) == [2.0]


def test_the_time_a_long_poll_held_a_request_goes_to_the_hold_histogram_not_its_latency() -> None:
    metrics = NodeMetrics(NODE)
    started = time.perf_counter() - 2.0  # served 2 s ago, 1.5 s of which held
    metrics.requests.observe_request("remoting", 11, 1, started, held=1.5)
    [(_, cumulative, latency_ms, _)] = metrics.latency.snapshot()
    assert 500 <= latency_ms < 1500 and cumulative[-1] == 1  # the 0.5 s to the answer, not the 2 s
    held = [
        sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == "rocketspark_pull_hold_seconds_sum"
    ]
    assert held == [1.5]
