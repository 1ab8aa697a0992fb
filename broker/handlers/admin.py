"""Admin requests: topics (create, update, delete, list, stats), broker permission, counters.

Every change is persisted before the answer and re-registered with the nameservers at once,
so routes reflect it without waiting for the 30 s heartbeat.
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING

from broker.handlers.offsets import LOGICAL_PREFIX
from broker.handlers.pull import check_readable
from broker.topics import validate_queue_nums
from rocketspark.errors import InvalidParameterError, TopicNotExistError
from rocketspark.protocol.codec import pack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_int, get_str
from rocketspark.protocol.types import Perm, TopicConfig
from rocketspark.protocol.validation import validate_topic_name

if TYPE_CHECKING:
    from broker.server import Broker


def register(broker: Broker) -> None:
    for code, handler in {
        RequestCode.UPDATE_AND_CREATE_TOPIC: create_topic,
        RequestCode.DELETE_TOPIC_IN_BROKER: delete_topic,
        RequestCode.GET_ALL_TOPIC_CONFIG: all_topics,
        RequestCode.GET_TOPIC_CONFIG: topic_config,
        RequestCode.GET_TOPIC_STATS_INFO: topic_stats,
        RequestCode.GET_BROKER_RUNTIME_INFO: runtime_info,
        RequestCode.GET_COUNTERS: counters,
        RequestCode.UPDATE_BROKER_CONFIG: update_broker_config,
    }.items():
        broker.dispatcher.register(code, partial(handler, broker))


async def create_topic(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    broker.role.check_writable()  # only the group's master changes what its slaves copy
    topic = get_str(cmd, "topic")
    validate_topic_name(topic)
    write = get_int(cmd, "writeQueueNums", 8)
    read = get_int(cmd, "readQueueNums", write)
    perm = get_int(cmd, "perm", Perm.READ_WRITE)
    validate_queue_nums(read, write)
    if perm & ~(Perm.READ_WRITE | Perm.INHERIT):
        raise InvalidParameterError(f"perm {perm} is not a combination of 4 (read), 2 (write) and 1 (inherit)")
    if broker.static.is_static(topic):
        raise InvalidParameterError(
            f'"{topic}" is a static topic: change its queues with remap_static_topic, not create_topic'
        )
    changed = broker.topics.put(TopicConfig(topic, read, write, perm), broker.store.commitlog.max_offset)
    if changed:
        await broker.registry.register_now([topic], incremental=True)
    return cmd.response(ext={"changed": changed})


async def delete_topic(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    broker.role.check_writable()  # only the group's master changes what its slaves copy
    topic = get_str(cmd, "topic")
    existed = broker.topics.delete(topic)
    broker.static.delete(topic)
    broker.store.drop_topic(topic)
    broker.offsets.drop_topic(topic)
    broker.offsets.drop_topic(LOGICAL_PREFIX + topic)
    broker.longpoll.notify_topic(topic)
    if existed:
        await broker.registry.register_now([topic])
    return cmd.response(ext={"existed": existed})


async def all_topics(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(body=pack([c.to_wire() for c in broker.topics.configs()]))


async def topic_config(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    """The topic's config and, for a static topic, this broker's mapping detail."""
    topic = get_str(cmd, "topic")
    config = broker.topics.get(topic)
    if config is None:
        raise TopicNotExistError(f'topic "{topic}" does not exist on broker {broker.name}')
    detail = broker.static.get(topic)
    return cmd.response(body=pack({"config": config.to_wire(), "mapping": detail.to_wire() if detail else None}))


async def topic_stats(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    """Per queue: min and max offset and when the newest message was stored."""
    topic = get_str(cmd, "topic")
    config = check_readable(broker, topic, 0)
    store = broker.store
    rows = []
    for queue_id in range(max(config.read_queue_nums, config.write_queue_nums)):
        low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        rows.append({"queueId": queue_id, "min": low, "max": high, "lastStoreMs": store.last_store_ms(topic, queue_id)})
    return cmd.response(body=pack(rows))


async def runtime_info(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(body=pack(broker.runtime_info()))


async def counters(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    stats = broker.store.stats
    return cmd.response(
        body=pack(
            {
                "requests": {str(code): n for code, n in sorted(broker.dispatcher.counters.items())},
                "messagesStored": stats.messages_put,
                "bytesStored": stats.bytes_put,
                "messagesRead": stats.messages_got,
                "segmentsDeleted": stats.segments_deleted,
                "indexMismatches": stats.index_mismatches,
                "queuesRebuilt": stats.queues_rebuilt,
                "scrubPasses": broker.store.scrub.stats.passes,
                "scrubSegments": broker.store.scrub.stats.segments,
                "scrubBytes": broker.store.scrub.stats.bytes,
                "scrubDamagedSegments": broker.store.scrub.stats.damaged_segments,
                "scrubDamage": broker.store.scrub.stats.damage,
                "longPollWaiting": broker.longpoll.waiting,
                "duplicatesDropped": broker.producers.duplicates_dropped,
                "systemBusy": broker.dispatcher.budget.refused,  # requests refused: too many bytes in flight
                "inflightRequestBytes": broker.dispatcher.budget.inflight_bytes,
                "inflightRequestBytesPeak": broker.dispatcher.budget.peak_bytes,
                "time": int(time.time() * 1000),
            }
        )
    )


async def update_broker_config(broker: Broker, cmd: RemotingCommand) -> RemotingCommand:
    unknown = set(cmd.ext) - {"brokerPermission"}
    if unknown:
        raise InvalidParameterError(
            f"only brokerPermission can change at run time; {', '.join(sorted(unknown))} needs a config file edit "
            "and a restart"
        )
    perm = get_int(cmd, "brokerPermission")
    if perm & ~Perm.READ_WRITE:
        raise InvalidParameterError(f"brokerPermission {perm} must combine 4 (read) and 2 (write)")
    broker.set_permission(perm)
    await broker.registry.register_now()
    return cmd.response(ext={"brokerPermission": perm})
