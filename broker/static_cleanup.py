"""Dropping expired segments from static topics (RocketMQ's ``TopicQueueMappingCleanService``).

For every logical queue this broker leads, the oldest sealed segment is looked at: once
retention has emptied its physical queue (its min offset reached its end), the segment is
Expired, and the leader drops it from the mapping, raising its epoch by one. The segment may
live on another broker; its min offset is then asked of that broker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rocketspark.errors import RocketSparkError
from rocketspark.protocol.codec import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.mapping import LogicQueueMappingItem
from rocketspark.remoting.client import check

if TYPE_CHECKING:
    from broker.server import Broker

log = logging.getLogger(__name__)


async def segment_min_offset(broker: Broker, topic: str, item: LogicQueueMappingItem) -> int | None:
    """Min offset of a segment's physical queue, wherever it lives; None if unreachable."""
    if item.bname == broker.name:
        return broker.store.min_offset(topic, item.queue_id)

    def remote() -> int | None:
        client = broker.registry.client
        for nameserver in broker.config.nameservers:
            try:
                info = unpack(
                    check(client.invoke(nameserver, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))).body
                )
                address = info["brokers"].get(item.bname, {}).get("addr")
                if not address:
                    return None
                request = RemotingCommand.request(
                    RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": item.queue_id}
                )
                return int(check(client.invoke(address, request, peer="broker")).ext["offset"])
            except RocketSparkError as exc:
                log.debug("cannot read min offset of %s/%s on %s: %s", topic, item.queue_id, item.bname, exc)
        return None

    return await asyncio.to_thread(remote)


async def clean_expired_segments(broker: Broker) -> list[str]:
    """Drop every expired first segment of the queues this broker leads; return the topics."""
    dropped: list[str] = []
    for topic, detail in list(broker.static.details.items()):
        for logical_id, items in list(detail.hosted_queues.items()):
            if detail.leader_of(logical_id) is None or len(items) < 2 or not items[0].sealed:
                continue
            low = await segment_min_offset(broker, topic, items[0])
            if (
                low is not None
                and low >= items[0].end_offset
                and broker.static.drop_front(topic, logical_id, items[0].gen)
            ):
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
