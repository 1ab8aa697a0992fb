"""One server's metrics: its registry, the request histogram every server has, and the HTTP
endpoint Prometheus scrapes.

Names follow RocketMQ 5 where it has one (``rocketmq_rpc_latency`` in milliseconds, with its
bucket bounds and its ``cluster``/``node_type``/``node_id`` labels on every series); ours start
with ``rocketspark_``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from rocketspark.errors import ConfigError
from rocketspark.metrics import http
from rocketspark.metrics.access import Refusal, ScrapeAccess
from rocketspark.metrics.labels import request_name, response_name
from rocketspark.security.tls import ServerTls

log = logging.getLogger(__name__)
REFUSAL_LOG_INTERVAL_S = 60.0  # a refused scrape is logged at most this often (Prometheus retries every scrape)

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


class NodeMetrics:
    """A server's registry and request metrics; ``serve`` opens ``/metrics``."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.registry = CollectorRegistry(auto_describe=False)
        self.families = Families(node)
        self.rpc_latency = Histogram(
            "rocketmq_rpc_latency",
            "Time to serve a request, in milliseconds, by protocol, request code and response code",
            [*node.names, "protocol_type", "request_code", "response_code"],
            buckets=RPC_LATENCY_BUCKETS_MS,
            registry=self.registry,
        )
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
        self._children: dict[tuple[str, int | str, int | str], tuple[Histogram, Histogram]] = {}
        self._server: http.Server | None = None
        self._refusal_logged = 0.0
        self.url = ""

    def observe_request(
        self, protocol: str, code: int | str, response_code: int | str, started: float, held: float = 0.0
    ) -> None:
        """A request served (``started``: its ``time.perf_counter()``), labelled by name as
        RocketMQ 5 does; ``held``, the seconds a long poll held it, goes to the hold histogram
        instead of its latency (the time to its answer once it has one). The children are
        cached so that the hot path does no label lookups after the first of each kind."""
        key = (protocol, code, response_code)
        children = self._children.get(key)
        if children is None:
            request = request_name(code)
            children = (
                self.rpc_latency.labels(*self.node.values, protocol, request, response_name(response_code)),
                self.pull_hold.labels(*self.node.values, protocol, request),
            )
            self._children[key] = children
        children[0].observe(max(0.0, time.perf_counter() - started - held) * 1000)
        if held > 0:
            children[1].observe(held)

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
