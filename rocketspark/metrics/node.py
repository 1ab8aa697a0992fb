"""One server's metrics: its registry, the request histogram every server has, and the HTTP
endpoint Prometheus scrapes. The histogram's counts are kept by :mod:`rocketspark.metrics.tally`
as requests are served, and turned into the ``rocketmq_rpc_latency`` family when Prometheus
scrapes.

Names follow RocketMQ 5 where it has one (``rocketmq_rpc_latency`` in milliseconds, with its
bucket bounds and its ``cluster``/``node_type``/``node_id`` labels on every series); ours start
with ``rocketspark_``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client import utils as prometheus_utils
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample

from rocketspark.errors import ConfigError
from rocketspark.metrics import http
from rocketspark.metrics.access import Refusal, ScrapeAccess
from rocketspark.metrics.labels import request_name, response_name
from rocketspark.metrics.tally import Requests, Tally
from rocketspark.security.tls import ServerTls

log = logging.getLogger(__name__)
_go_float: Callable[[float], str] = prometheus_utils.floatToGoString  # how prometheus_client writes a bound ("1.0")
REFUSAL_LOG_INTERVAL_S = 60.0  # a refused scrape is logged at most this often (Prometheus retries every scrape)

RPC_LATENCY = "rocketmq_rpc_latency"
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 10, 100, 1000, 3000)  # RocketMQ's le_1_ms ... le_3_s
FLUSH_LATENCY_BUCKETS_MS = (1, 5, 10, 50, 100, 500, 1000, 5000)
PULL_HOLD_BUCKETS_S = (0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60)


@dataclass(frozen=True, slots=True)
class Node:
    """The labels every series of a server carries (RocketMQ's)."""

    cluster: str
    node_type: str  # "broker" | "nameserver"
    node_id: str

    @property
    def names(self) -> list[str]:
        return ["cluster", "node_type", "node_id"]

    @property
    def values(self) -> list[str]:
        return [self.cluster, self.node_type, self.node_id]


Rows = Iterable[tuple[Sequence[str], float]]  # (label values after the node's, value)


class Families:
    """Builds metric families that carry a node's labels, for a ``Collector``'s ``collect``."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def gauge(self, name: str, doc: str, labels: Sequence[str] = (), rows: Rows = ()) -> Metric:
        return self._fill(GaugeMetricFamily(name, doc, labels=[*self.node.names, *labels]), rows)

    def counter(self, name: str, doc: str, labels: Sequence[str] = (), rows: Rows = ()) -> Metric:
        return self._fill(CounterMetricFamily(name, doc, labels=[*self.node.names, *labels]), rows)

    def _fill(self, family: Metric, rows: Rows) -> Metric:
        add = family.add_metric  # type: ignore[attr-defined]
        for values, value in rows:
            add([*self.node.values, *values], value)
        return family

    def refusals(self, counts: Mapping[str, int]) -> Metric:
        """Requests security refused (``Guard.refusals``), by reason."""
        return self.counter(
            "rocketspark_auth_refusals",
            "Requests refused by security: reason is authentication (unknown user, bad signature, clock) or permission",
            ["reason"],
            [([reason], counts.get(reason, 0)) for reason in ("authentication", "permission")],
        )


class Collecting(Protocol):
    """What a server hands its metrics: the families it reads at scrape time."""

    def collect(self) -> Iterator[Metric]: ...


class _Latencies:
    """``rocketmq_rpc_latency`` read from the tally at scrape time, labelled by name as
    RocketMQ 5 does (``send_message``, ``success``): request codes that name the same request
    (a RocketMQ client's and ours) are one series."""

    def __init__(self, node: Node, tally: Tally) -> None:
        self.node = node
        self.tally = tally
        self.names = [*node.names, "protocol_type", "request_code", "response_code"]
        self.bounds = [*(_go_float(bound) for bound in tally.bounds), "+Inf"]

    def collect(self) -> Iterator[Metric]:
        merged: dict[tuple[str, str, str], tuple[list[int], float, float]] = {}
        for (protocol, code, response), counts, total, created in self.tally.snapshot():
            labels = (protocol, request_name(code), response_name(response))
            seen = merged.get(labels)
            if seen is not None:
                counts = [a + b for a, b in zip(seen[0], counts, strict=True)]
                total, created = total + seen[1], min(created, seen[2])
            merged[labels] = (counts, total, created)
        family = HistogramMetricFamily(
            RPC_LATENCY,
            "Time to serve a request, in milliseconds, by protocol, request code and response code",
            labels=self.names,
        )
        for labels, (counts, total, created) in merged.items():
            values = [*self.node.values, *labels]
            family.add_metric(values, list(zip(self.bounds, counts, strict=True)), total)
            family.samples.append(Sample(f"{RPC_LATENCY}_created", dict(zip(self.names, values, strict=True)), created))
        yield family


class NodeMetrics:
    """A server's registry and request metrics; ``serve`` opens ``/metrics``."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.registry = CollectorRegistry(auto_describe=False)
        self.families = Families(node)
        self.latency = Tally(RPC_LATENCY_BUCKETS_MS)
        self.registry.register(_Latencies(node, self.latency))
        self.pull_hold = Histogram(
            "rocketspark_pull_hold_seconds",
            "Time a long-polled pull was held waiting for messages, in seconds (kept out of rocketmq_rpc_latency)",
            [*node.names, "protocol_type", "request_code"],
            buckets=PULL_HOLD_BUCKETS_S,
            registry=self.registry,
        )
        self.scrape_refusals = Counter(
            "rocketspark_scrape_refusals",
            "Scrapes of /metrics refused: reason is credentials (none or wrong) or permission (a user without Get "
            "or List on Cluster)",
            [*node.names, "reason"],
            registry=self.registry,
        )
        for reason in ("credentials", "permission"):
            self.scrape_refusals.labels(*node.values, reason)
        self._held: dict[tuple[str, int | str], Histogram] = {}
        self.requests = Requests(self.latency, self._observe_held)  # the dispatcher's and v2 endpoint's observer
        self._server: http.Server | None = None
        self._refusal_logged = 0.0
        self.url = ""

    def _observe_held(self, protocol: str, code: int | str, held: float) -> None:
        """The seconds a long poll held a request (``requests`` hands them here), labelled by
        name; each kind's child is cached, so that a held pull does no label lookups after the
        first of its kind."""
        child = self._held.get((protocol, code))
        if child is None:
            child = self.pull_hold.labels(*self.node.values, protocol, request_name(code))
            self._held[(protocol, code)] = child
        child.observe(held)

    def add(self, collector: Collecting) -> None:
        self.registry.register(collector)

    def refused(self, refusal: Refusal, client: str) -> None:
        """Count a refused scrape, and log it now and then: Prometheus shows only the status."""
        self.scrape_refusals.labels(*self.node.values, refusal.reason).inc()
        now = time.monotonic()
        if now - self._refusal_logged >= REFUSAL_LOG_INTERVAL_S:
            self._refusal_logged = now
            log.warning(
                "%s %s refused a scrape of /metrics from %s (%d): %s",
                self.node.node_type,
                self.node.node_id,
                client,
                refusal.status,
                refusal.body,
            )

    def serve(
        self,
        host: str,
        port: int,
        shown_host: str,
        tls: ServerTls | None = None,
        access: ScrapeAccess | None = None,
    ) -> str:
        """Listen on ``host:port`` (0: a free port) and return the ``/metrics`` URL, on
        ``shown_host`` (the address the server advertises). With TLS the server's own
        certificate is used and the URL is https; with ``access`` every request must carry
        the credentials it asks for (401 with a challenge, or 403, otherwise)."""
        registry = self.registry
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                refusal = access.check(self.headers.get("Authorization")) if access is not None else None
                if refusal is not None:
                    metrics.refused(refusal, self.client_address[0])
                    body = (refusal.body + "\n").encode()
                    self.send_response(refusal.status)
                    if refusal.challenge:
                        self.send_header("WWW-Authenticate", refusal.challenge)
                    self.send_header("Content-Type", "text/plain; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "metrics are at /metrics")
                    return
                encoder, kind = choose_encoder(self.headers.get("Accept", ""))
                body = encoder(registry)
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        try:
            context = tls.ssl_context() if tls is not None else None
            self._server = http.serve(host, port, Handler, context, "metrics")
        except OSError as exc:
            raise ConfigError(
                f"the {self.node.node_type} {self.node.node_id} cannot serve metrics on {host}:{port}: "
                f"{exc.strerror or exc}; pick another metrics_port (0: any free one, -1: off)"
            ) from exc
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://{shown_host}:{http.port_of(self._server)}/metrics"
        return self.url

    def close(self) -> None:
        if self._server is not None:
            http.stop(self._server)
            self._server = None
