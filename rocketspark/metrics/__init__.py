"""Prometheus metrics for brokers and nameservers (``/metrics``, through ``prometheus_client``).

Every server has its own registry (:mod:`rocketspark.metrics.node`): several servers share a
process in ``LocalCluster`` and tests, so nothing goes into the library's global registry. The
request latency histogram's counts are kept as requests are served
(:mod:`rocketspark.metrics.tally`, compiled); everything else is read from the server's own
counters and state when Prometheus scrapes (``Collector``s), so the hot paths pay for a
dictionary update at most and no label set grows per message or per offset.

The package ships a Grafana dashboard and Prometheus alert rules for these series
(docs/operations/metrics.md): ``GRAFANA_DASHBOARD`` and ``ALERT_RULES`` are their paths.
"""

from importlib.resources import files

GRAFANA_DASHBOARD = files(__name__) / "grafana" / "rocketspark-dashboard.json"
ALERT_RULES = files(__name__) / "prometheus" / "rocketspark-alerts.yml"
