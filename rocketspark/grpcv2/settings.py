"""The settings a client is told to use, in answer to the ``Settings`` it sends on ``Telemetry``.

The values are those RocketMQ 5's proxy answers with by default (its ``ProxyConfig``): a
producer retries a send 3 times backing off from 10 ms to 1 s, a body may be as large as the
broker's ``max_message_bytes`` (4 MiB, RocketMQ's default too) and message
types are checked against the queue's; a consumer receives 32 at a time, long-polls for 20 s and
has a message delivered at most 17 times (16 retries) before it goes to the dead-letter queue.
"""

from __future__ import annotations

from typing import Final

from rocketspark.grpcv2.stubs import definition_pb2 as pb

PRODUCER_ATTEMPTS: Final = 3
CONSUMER_ATTEMPTS: Final = 17  # a first delivery and RocketMQ's 16 retries
RECEIVE_BATCH: Final = 32
LONG_POLLING_MS: Final = 20_000


def _backoff(policy: pb.RetryPolicy, attempts: int, initial_ms: int, max_ms: int) -> None:
    """Fields set one by one: the stubs' Duration lives in their own descriptor pool, so a
    Duration built from protobuf's default pool cannot be assigned to them."""
    policy.max_attempts = attempts
    policy.exponential_backoff.initial.FromMilliseconds(initial_ms)
    policy.exponential_backoff.max.FromMilliseconds(max_ms)
    policy.exponential_backoff.multiplier = 2.0


def merged(client: pb.Settings, max_body_bytes: int, consumer_attempts: int = CONSUMER_ATTEMPTS) -> pb.Settings:
    """The client's settings with the server's part filled in; ``max_body_bytes``: the
    broker's ``max_message_bytes``; ``consumer_attempts``: deliveries before the DLQ."""
    answer = pb.Settings()
    answer.CopyFrom(client)
    if client.HasField("publishing"):
        _backoff(answer.backoff_policy, PRODUCER_ATTEMPTS, 10, 1000)
        answer.publishing.max_body_size = max_body_bytes
        answer.publishing.validate_message_type = True
    elif client.HasField("subscription"):
        _backoff(answer.backoff_policy, consumer_attempts, 1000, 60_000)
        answer.subscription.receive_batch_size = RECEIVE_BATCH
        answer.subscription.long_polling_timeout.FromMilliseconds(LONG_POLLING_MS)
        answer.subscription.fifo = False
    return answer
