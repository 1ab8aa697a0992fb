"""The group consumer: push-style consumption built on pull, with client-side rebalance.

As in RocketMQ (seed 001), every member heartbeats to the brokers of its topics; the brokers
answer with the group's members, and each member computes its own share of the queues with
the group's allocation strategy (``average``, ``average_by_circle``, ``consistent_hash``)
from the same sorted inputs, so each queue has exactly one member. A member rebalances every
``rebalance_interval_ms`` (20 s) and as soon as a heartbeat shows the membership changed: a
member that leaves unregisters at once; one that dies drops out after the brokers' heartbeat
timeout (``consumer_expired_ms``), and its queues are taken over then
(:mod:`rocketspark.client.rebalance`: the share, and the handover through queue locks).

Each owned queue is pulled by its own thread (long polling), messages are handed to the
handler in order, and the progress is committed to the broker, so a queue that moves to
another member continues where this one stopped: at-least-once delivery.

Messages are filtered by ``tags`` (``"a || b"``) or by an SQL92 expression ``sql`` over their
properties (RocketMQ's ``MessageSelector.bySql``), on the brokers and again message by
message; a bad expression is refused by the constructor, with where it goes wrong.

A batch the handler fails on is sent back to the group's retry topic and the queue moves on;
the group consumes its retry topic too, and a message failing ``max_reconsume_times`` times
ends in the dead-letter queue (``rocketspark.client.retry``). Only when sending back fails
does the queue wait and hand the same batch over again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Unpack

from rocketspark.client.allocate import STRATEGIES
from rocketspark.client.consumer import Consumer
from rocketspark.client.heartbeats import INNER_PRODUCER_GROUP, client_version
from rocketspark.client.producer import Producer
from rocketspark.client.pulling import parse_filter
from rocketspark.client.rebalance import Member, OwnedQueues, QueueKey, Worker
from rocketspark.client.retry import RETRY_DELAYS_MS, RetryPolicy, as_first_sent, due_at_ms
from rocketspark.client.route_push import new_client_id
from rocketspark.errors import InvalidParameterError, RocketSparkError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import MAX_RECONSUME_TIMES, ORIGIN_MESSAGE_ID, RECONSUME_TIME, retry_topic
from rocketspark.protocol.types import MessageExt, PullStatus
from rocketspark.security.client_side import SecurityKwargs

log = logging.getLogger(__name__)

Handler = Callable[[list[MessageExt]], None]


class GroupConsumer:
    def __init__(
        self,
        nameserver: str | list[str] | None,
        group: str,
        topics: list[str] | str,
        handler: Handler,
        *,
        strategy: str = "average",
        rebalance_interval_ms: int = 20_000,
        heartbeat_interval_ms: int = 3_000,
        commit_interval_ms: int = 1_000,
        max_messages: int = 32,
        tags: str | None = None,
        sql: str | None = None,
        start_from: str = "latest",
        client_id: str | None = None,
        max_reconsume_times: int = MAX_RECONSUME_TIMES,
        retry_delays_ms: Sequence[int] = RETRY_DELAYS_MS,
        **security: Unpack[SecurityKwargs],
    ) -> None:
        if strategy not in STRATEGIES:
            raise InvalidParameterError(f"unknown allocation strategy {strategy!r}; use one of {sorted(STRATEGIES)}")
        if start_from not in ("earliest", "latest"):
            raise InvalidParameterError('start_from must be "earliest" or "latest"')
        self.group = group
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self.handler = handler
        self.strategy = strategy
        self.rebalance_interval_s = rebalance_interval_ms / 1000
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.commit_interval_s = commit_interval_ms / 1000
        self.max_messages = max_messages
        parse_filter(tags, sql)  # a bad SQL92 expression is refused here, with where it goes wrong
        self.tags, self.sql = tags, sql
        self.start_from = start_from
        self.client_id = client_id or new_client_id()
        self.retry = RetryPolicy(max_reconsume_times, tuple(retry_delays_ms))
        self.retry_topic = retry_topic(group)
        self.consumer = Consumer(nameserver, labels={"consumerGroup": group, "via": "group consumer"}, **security)
        self._nameserver, self._security = nameserver, security
        self._producer: Producer | None = None  # sends failed messages back; made on first need
        self.members: list[str] = []
        member = Member(group, self.client_id, self.topics, self.retry_topic, strategy, start_from)
        self.owned = OwnedQueues(self.consumer, member, self._pull_loop)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> GroupConsumer:
        self._heartbeat()
        self.owned.rebalance(self.members)
        self._thread = threading.Thread(target=self._loop, name=f"group-{self.group}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop pulling, commit where each queue got to, and leave the group at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.owned.release_all()
        self._each_broker(RequestCode.UNREGISTER_CLIENT, {"consumerGroup": self.group, "clientId": self.client_id})
        self.consumer.close()
        if self._producer is not None:
            self._producer.close()

    def __enter__(self) -> GroupConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def workers(self) -> dict[QueueKey, Worker]:
        """The owned queues' workers, the group's retry-topic queues among them."""
        return self.owned.workers

    @property
    def assignment(self) -> set[QueueKey]:
        """The queues of the topics given that this member owns (``workers`` also has the
        group's retry-topic queues it owns)."""
        return {key for key in self.workers if key[0] != self.retry_topic}

    # -- membership ----------------------------------------------------------------------------

    def _brokers(self) -> dict[str, str]:
        brokers: dict[str, str] = {}
        for topic in self.topics:
            try:
                route = self.consumer.routes.get(topic)
            except RocketSparkError as exc:
                log.warning("group %s: no route for %s: %s", self.group, topic, exc)
                continue
            brokers.update({b.broker_name: b.address for b in route.brokers})
        return brokers

    def _each_broker(
        self, code: int, ext: dict[str, Any], brokers: dict[str, str] | None = None
    ) -> list[RemotingCommand]:
        answers = []
        for name, address in sorted((self._brokers() if brokers is None else brokers).items()):
            try:
                answers.append(self.consumer.call(address, RemotingCommand.request(code, ext), 2000))
            except RocketSparkError as exc:
                log.debug("group %s: broker %s did not answer %s: %s", self.group, name, code, exc)
        return answers

    def _heartbeat(self) -> bool:
        """Heartbeat every broker; True when the membership changed."""
        ext: dict[str, object] = {"consumerGroup": self.group, "clientId": self.client_id, "topics": self.topics}
        ext |= {"clientVersion": client_version(), "expressionType": "SQL92" if self.sql else "TAG"}
        ext["expression"] = self.sql or self.tags or "*"
        resets = self.owned.resets_seen
        if resets:  # so that a broker that restarted knows what a new reset must exceed
            ext["resetsSeen"] = {t: v for t, v in resets.items() if v > 0}
        brokers = self._brokers()
        answers = self._each_broker(RequestCode.HEART_BEAT, ext, brokers)
        self.owned.follow_resets(answers, complete=bool(brokers) and len(answers) == len(brokers))
        seen = [sorted(a.ext.get("members", [])) for a in answers if a.ext.get("members")]
        if not seen:
            return False
        members = max(seen, key=len)  # a broker that just restarted may not know everyone yet
        if self.client_id not in members:
            members = sorted([*members, self.client_id])
        changed = members != self.members
        self.members = members
        return changed

    def _loop(self) -> None:
        next_rebalance = time.monotonic() + self.rebalance_interval_s
        while not self._stop.wait(self.heartbeat_interval_s):
            try:
                changed = self._heartbeat()
                if changed or self.owned.waiting or time.monotonic() >= next_rebalance:
                    self.owned.rebalance(self.members)
                    next_rebalance = time.monotonic() + self.rebalance_interval_s
            except Exception:
                log.exception("group %s: heartbeat or rebalance failed; retrying", self.group)

    # -- pulling -------------------------------------------------------------------------------

    def _pull_loop(self, worker: Worker) -> None:
        topic, queue_id = worker.key
        last_commit = time.monotonic()
        backoff = 0.05
        while not worker.stop.is_set() and not self._stop.is_set():
            self.owned.apply_reset(worker)
            try:
                result = self.consumer.pull(
                    topic, queue_id, worker.offset, self.max_messages, tags=self.tags, sql=self.sql, long_poll_ms=500
                )
            except Exception as exc:  # a thread that ended here would leave its queue unread
                if isinstance(exc, RocketSparkError):
                    log.debug("group %s: pull %s/%s failed: %s", self.group, topic, queue_id, exc)
                else:
                    log.exception("group %s: pull %s/%s failed; retrying", self.group, topic, queue_id)
                worker.stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            if worker.reset_to is not None:
                continue  # read from where the group was before the reset: dropped
            next_offset = result.next_offset
            if result.messages:
                batch = result.messages
                if topic == self.retry_topic:
                    batch = self._due(worker, batch)
                    if not batch:
                        continue  # the first is not due yet: pull again (at most a second later)
                    if len(batch) < len(result.messages):
                        next_offset = batch[-1].queue_offset + 1
                if not self._consume(worker, batch):
                    # Sending back failed too. At-least-once: the offset stays, so the same
                    # messages are handed over again after the backoff.
                    worker.stop.wait(backoff)
                    backoff = min(backoff * 2, 2.0)
                    continue
            backoff = 0.05
            if result.status is not PullStatus.NO_NEW_MSG or next_offset != worker.offset:
                worker.offset = next_offset
            if time.monotonic() - last_commit >= self.commit_interval_s:
                self.owned.commit(worker)
                last_commit = time.monotonic()

    # -- failed messages ------------------------------------------------------------------------

    def _due(self, worker: Worker, batch: list[MessageExt]) -> list[MessageExt]:
        """The messages of a retry-topic batch that are due, from its head; none (after a
        wait of at most a second) while its first is not."""
        now = int(time.time() * 1000)
        wait_ms = due_at_ms(batch[0]) - now
        if wait_ms > 0:
            worker.stop.wait(min(wait_ms, 1000) / 1000)
            return []
        due = 0
        while due < len(batch) and due_at_ms(batch[due]) <= now:
            due += 1
        return batch[:due]

    def _consume(self, worker: Worker, batch: list[MessageExt]) -> bool:
        """Hand ``batch`` over. When the handler fails on a batch of several, each message is
        handed over alone, so that only the ones it fails on are sent back (retry topic, or
        the dead-letter queue): a poison message takes no healthy batch-mate to the
        dead-letter queue. False when sending back failed: the batch is handed over again."""
        retried = worker.key[0] == self.retry_topic
        shown = [as_first_sent(m) for m in batch] if retried else batch
        try:
            self.handler(shown)
            return True
        except Exception:
            log.exception(
                "group %s: the handler failed on %d messages of %s/%s at offset %d",
                self.group,
                len(batch),
                *worker.key,
                worker.offset,
            )
        failed = (
            batch if len(batch) == 1 else [m for m, one in zip(batch, shown, strict=True) if not self._handles(one)]
        )
        try:
            for message in failed:
                back = self.retry.send_back(self.group, message)
                self._producer_for_retries().send(back)
                if back.topic != self.retry_topic:
                    log.warning(
                        "group %s: message %s failed %s times; moved to the dead-letter queue %s",
                        self.group,
                        back.properties.get(ORIGIN_MESSAGE_ID),
                        back.properties.get(RECONSUME_TIME),
                        back.topic,
                    )
            return True
        except RocketSparkError as exc:
            log.warning("group %s: sending failed messages back failed (%s); handing them over again", self.group, exc)
            return False

    def _handles(self, message: MessageExt) -> bool:
        try:
            self.handler([message])
            return True
        except Exception:
            log.warning("group %s: the handler failed on message %s; sending it back", self.group, message.msg_id)
            return False

    def _producer_for_retries(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self._nameserver, group=INNER_PRODUCER_GROUP, **self._security)
        return self._producer
