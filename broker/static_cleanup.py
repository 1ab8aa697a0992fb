"""Dropping expired segments from static topics (RocketMQ's ``TopicQueueMappingCleanService``).

For every logical queue this broker leads, the oldest sealed segment is looked at: once
retention has emptied its physical queue (its min offset reached its end), the segment is
Expired, and the leader drops it from the mapping, raising its epoch by one. The segment may
live on another broker; its min offset is then asked of that broker.
"""

from __future__ import annotations

import asyncio
import logging

from broker.static_topics import StaticTopics
from broker.store.store import MessageStore
from rocketspark.errors import RocketSparkError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import LogicQueueMappingItem
from rocketspark.remoting.client import check
from rocketspark.remoting.transport import Transport

log = logging.getLogger(__name__)


def broker_addresses(client: Transport, nameservers: list[str], name: str) -> dict[str, str]:
    """Broker name -> address, from every nameserver (one that just restarted may not know
    every broker yet; the first address heard for a name is kept). Blocking: run in a thread."""
    addresses: dict[str, str] = {}
    request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    for nameserver in nameservers:
        try:
            info = unpack(check(client.invoke(nameserver, request)).body)
        except RocketSparkError as exc:
            log.debug("broker %s: nameserver %s gave no broker addresses: %s", name, nameserver, exc)
            continue
        for name, live in info["brokers"].items():
            if live.get("addr"):
                addresses.setdefault(name, live["addr"])
    return addresses


def remote_min_offset(client: Transport, address: str, topic: str, item: LogicQueueMappingItem) -> int | None:
    """Min offset of a segment's physical queue on another broker; None if it does not answer."""
    request = RemotingCommand.request(RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": item.queue_id})
    try:
        return int(check(client.invoke(address, request)).ext["offset"])
    except RocketSparkError as exc:
        log.debug("cannot read min offset of %s/%s on %s: %s", topic, item.queue_id, item.bname, exc)
        return None


class SegmentOffsets:
    """Min offsets of segments for one cleanup round: a local segment's from the store, a
    remote one's from its broker, whose address is looked up (from the nameservers) once
    per round."""

    def __init__(self, name: str, store: MessageStore, client: Transport, nameservers: list[str]) -> None:
        self.name = name
        self.store = store
        self.client = client
        self.nameservers = nameservers
        self._addresses: dict[str, str] | None = None

    async def min_offset(self, topic: str, item: LogicQueueMappingItem) -> int | None:
        """None when the segment's broker is unknown or does not answer."""
        if item.bname == self.name:
            return self.store.min_offset(topic, item.queue_id)
        if self._addresses is None:
            self._addresses = await asyncio.to_thread(broker_addresses, self.client, self.nameservers, self.name)
        address = self._addresses.get(item.bname)
        if address is None:
            return None
        return await asyncio.to_thread(remote_min_offset, self.client, address, topic, item)


async def clean_expired_segments(static: StaticTopics, offsets: SegmentOffsets) -> list[str]:
    """Drop every expired first segment of the queues this broker leads; return the topics."""
    dropped: list[str] = []
    for topic, detail in list(static.details.items()):
        for logical_id, items in list(detail.hosted_queues.items()):
            if detail.leader_of(logical_id) is None or len(items) < 2 or not items[0].sealed:
                continue
            low = await offsets.min_offset(topic, items[0])
            if low is not None and low >= items[0].end_offset and static.drop_front(topic, logical_id, items[0].gen):
                log.info(
                    "static topic %s: dropped expired segment gen %d of logical queue %d (%s queue %d)",
                    topic,
                    items[0].gen,
                    logical_id,
                    items[0].bname,
                    items[0].queue_id,
                )
                if topic not in dropped:
                    dropped.append(topic)
    return dropped
