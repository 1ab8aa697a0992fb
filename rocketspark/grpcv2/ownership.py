"""Which endpoint serves a consumer group's queues: the one holding the queue's lock.

Pop consumption keeps a group's in-flight messages in the endpoint that hands them out, so two
endpoints must never serve one queue of one group at once (each would hand every message out).
An endpoint serving a group joins it as a member on every broker (``HEART_BEAT``, under an id
made of its own address, so a restarted endpoint is the same member) and takes each queue's
lock (``LOCK_BATCH_MQ``, the lock our ``GroupConsumer`` members take); it serves only the queues
it holds. A queue held by another endpoint is left to it until that one lets go (its clients
went quiet) or is gone (the brokers' ``consumer_expired_ms``).

Blocking calls, from worker threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rocketspark.errors import RocketSparkError
from rocketspark.grpcv2.clients import Clients
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand

log = logging.getLogger(__name__)
CALL_TIMEOUT_MS = 2000


class Ownership:
    def __init__(self, clients: Clients, client_id: Callable[[], str]) -> None:
        self.clients = clients
        self._client_id = client_id  # known once the endpoint is bound

    @property
    def client_id(self) -> str:
        return self._client_id()

    def claim(self, group: str, topic: str, queue_ids: list[int]) -> tuple[set[int], set[int]]:
        """Be a member of ``group`` and hold what locks can be had: the queues held, and those
        whose lock could not be asked for (their broker did not answer: held or not, unknown)."""
        self._each_broker(
            RequestCode.HEART_BEAT, {"consumerGroup": group, "clientId": self.client_id, "topics": [topic]}
        )
        held, unknown = set(), set()
        consumer = self.clients.consumer
        for queue_id in queue_ids:
            try:
                if consumer.lock_queue(group, self.client_id, topic, queue_id) == self.client_id:
                    held.add(queue_id)
            except RocketSparkError as exc:
                log.debug("grpc v2 endpoint: no answer on the lock of %s queue %d: %s", topic, queue_id, exc)
                unknown.add(queue_id)
        return held, unknown

    def release(self, group: str, topic: str, queue_ids: list[int]) -> None:
        """Let the queues go and leave the group, so another endpoint may take them at once."""
        consumer = self.clients.consumer
        for queue_id in queue_ids:
            try:
                consumer.unlock_queue(group, self.client_id, topic, queue_id)
            except RocketSparkError as exc:
                log.debug("grpc v2 endpoint: unlocking %s queue %d failed: %s", topic, queue_id, exc)
        self._each_broker(RequestCode.UNREGISTER_CLIENT, {"consumerGroup": group, "clientId": self.client_id})

    def _each_broker(self, code: int, ext: dict[str, object]) -> None:
        consumer = self.clients.consumer
        for name, address in sorted(self.clients.admin.brokers().items()):
            try:
                consumer.call(address, RemotingCommand.request(code, ext), CALL_TIMEOUT_MS)
            except RocketSparkError as exc:
                log.debug("grpc v2 endpoint: broker %s did not answer request %d: %s", name, code, exc)
