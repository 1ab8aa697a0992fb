"""Prometheus metrics for brokers and nameservers (``/metrics``, through ``prometheus_client``).

Every server has its own registry (:mod:`rocketspark.metrics.node`): several servers share a
process in ``LocalCluster`` and tests, so nothing goes into the library's global registry. The
request latency histogram is observed as requests are served; everything else is read from
the server's own counters and state when Prometheus scrapes (``Collector``s), so the hot paths
pay for a dictionary update at most and no label set grows per message or per offset.
"""
