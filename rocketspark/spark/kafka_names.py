"""Spark's Kafka connector options, and what to write instead with ``format("rocketmq")``.

Most Spark users come from ``format("kafka")`` and type its option names first; an unknown
option that is one of Kafka's is answered with our equivalent (or why none is needed) rather
than a bare "unknown option". Names are matched case-insensitively (Spark hands options over
lower-cased, so the user's own spelling is gone by then) and echoed as Kafka's docs spell them.
"""

from __future__ import annotations

from typing import Final

_SECURITY = 'use "tls", "tlsCaFile", "tlsCertFile" and "tlsKeyFile" for TLS, "accessKey" and "secretKey" to sign'
_NO_GROUP = (
    "not needed: progress is kept in the checkpoint and no consumer group is made "
    '(set "consumerGroup" to also commit it to a group, for lag dashboards)'
)

# Kafka's name as its docs spell it -> what to do here.
KAFKA: Final[dict[str, str]] = {
    "kafka.bootstrap.servers": 'use "nameserver" (host:port[,host:port]; the brokers are found through it)',
    "subscribe": 'use "topic" (a comma list of topics, as subscribe)',
    "subscribePattern": 'use "topicPattern" (a regular expression for whole topic names)',
    "endingOffsetsByTimestamp": 'use "endingTimestamp" (one time, in ms, for every queue)',
    "kafkaConsumer.pollTimeoutMs": 'use "pullTimeoutMs"',
    "fetchOffset.numRetries": "not needed: offsets are read from the brokers that hold each logical queue",
    "fetchOffset.retryIntervalMs": "not needed: offsets are read from the brokers that hold each logical queue",
    "maxRecordsPerPartition": "not available: one Spark partition per logical queue; "
    'limit a batch with "maxOffsetsPerTrigger"',
    "groupIdPrefix": _NO_GROUP,
    "kafka.group.id": _NO_GROUP,
    "includeHeaders": 'reading, use "includeProperties" (a message\'s properties are its headers); '
    'writing, a "properties" column is written as they are',
    "kafka.security.protocol": _SECURITY,
}
_BY_KEY: Final = {name.lower(): name for name in KAFKA}


def kafka_hint(key: str) -> str | None:
    """What follows ``unknown option "<key>"`` when ``key`` (as Spark gave it) is one of
    Kafka's: Kafka's spelling where it differs, and what to use here; None when it is not."""
    key = key.lower()
    if key in _BY_KEY:
        name = _BY_KEY[key]
        said = f' (Kafka\'s "{name}")' if name != key else ", a Kafka connector option"
        return f"{said}: {KAFKA[name]}"
    if key.startswith(("kafka.ssl.", "kafka.sasl.")):
        return f", a Kafka client setting: {_SECURITY}"
    if key.startswith("kafka."):
        return ', a Kafka client setting: not needed, the cluster is reached through "nameserver"'
    return None
