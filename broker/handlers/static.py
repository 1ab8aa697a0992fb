"""Static-topic admin requests: store a mapping, seal leader segments before a remap.

UPDATE_AND_CREATE_STATIC_TOPIC (513) carries this broker's ``TopicQueueMappingDetail``; the
broker stores it, sizes the topic's physical queues to it and registers with the nameservers
before answering. SEAL_LOGIC_QUEUES closes the open segments it leads at their current end,
so that no message can land after the point the new segment starts from.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from broker.dedupe import ProducerTable
from broker.ha.role import Role
from broker.longpoll import LongPollHub
from broker.registry import Registry
from broker.static_topics import StaticTopics
from broker.store.store import MessageStore
from broker.topics import TopicTable
from rocketspark.errors import InvalidParameterError, MalformedRequestError
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.headers import get_list, get_str
from rocketspark.protocol.static_mapping import LogicQueueMappingItem, TopicQueueMappingDetail
from rocketspark.protocol.types import Perm, TopicConfig
from rocketspark.protocol.validation import validate_topic_name
from rocketspark.remoting.server import Dispatcher


@dataclass(frozen=True, slots=True)
class StaticContext:
    """What static-topic changes touch."""

    name: str
    topics: TopicTable
    static: StaticTopics
    store: MessageStore
    longpoll: LongPollHub
    role: Role
    registry: Registry
    producers: ProducerTable


def register(dispatcher: Dispatcher, ctx: StaticContext) -> None:
    dispatcher.register(RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC, partial(update_static_topic, ctx))
    dispatcher.register(RequestCode.SEAL_LOGIC_QUEUES, partial(seal_queues, ctx))


async def update_static_topic(ctx: StaticContext, cmd: RemotingCommand) -> RemotingCommand:
    ctx.role.check_writable()  # only the group's master changes what its slaves copy
    body = unpack(cmd.body)
    if not isinstance(body, dict) or "mapping" not in body:
        raise MalformedRequestError("UPDATE_AND_CREATE_STATIC_TOPIC needs a body {mapping, force}")
    try:
        detail = TopicQueueMappingDetail.from_wire(body["mapping"])
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise MalformedRequestError(f"the mapping in the request does not parse: {exc!r}") from None
    validate_topic_name(detail.topic)
    existing = ctx.topics.get(detail.topic)
    if existing is not None and not ctx.static.is_static(detail.topic):
        raise InvalidParameterError(
            f'"{detail.topic}" is already a normal topic on broker {ctx.name}; a static topic needs a name of '
            "its own (or delete the normal topic first)"
        )
    changed = ctx.static.update(detail, force=bool(body.get("force", False)))
    # The sequences the old leaders had of the queues taken over here: a Spark micro-batch
    # re-run after the remap is deduplicated as the old leader would have done.
    ctx.producers.adopt(list(body.get("producers", [])))
    queues = max(detail.physical_queue_count(), existing.write_queue_nums if existing else 0, 1)
    changed |= ctx.topics.put(TopicConfig(detail.topic, queues, queues, Perm.READ_WRITE), ctx.store.log_max_offset)
    if changed:
        ctx.longpoll.notify_topic(detail.topic)  # readers held on a segment that changed re-check it
        await ctx.registry.register_now([detail.topic])
    return cmd.response(ext={"changed": changed, "epoch": detail.epoch})


async def seal_queues(ctx: StaticContext, cmd: RemotingCommand) -> RemotingCommand:
    ctx.role.check_writable()  # only the group's master changes what its slaves copy
    """Seal the open segments of the given logical queues; answer each one's end offset and
    its idempotent producers' sequences (handed to the queue's next leader)."""
    topic = get_str(cmd, "topic")
    logical_ids = [_logical_id(raw) for raw in get_list(cmd, "logicQueueIds")]
    before = ctx.static.get(topic)
    sealed: dict[int, LogicQueueMappingItem] | None = None
    try:
        sealed = ctx.static.seal(topic, logical_ids, partial(ctx.store.max_offset, topic))
    finally:
        # Tell the nameservers, also when saving the seal failed after it took effect here.
        if sealed is not None or ctx.static.get(topic) is not before:
            await ctx.registry.register_now([topic])
    for item in sealed.values():
        ctx.longpoll.notify((topic, item.queue_id))  # held reads of the segment stop at its end
    ends = {str(logical_id): item.end_offset for logical_id, item in sealed.items()}
    producers = {str(logical_id): ctx.producers.rows_for(topic, item.queue_id) for logical_id, item in sealed.items()}
    return cmd.response(body=pack({"ends": ends, "producers": producers}))


def _logical_id(raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise InvalidParameterError(f"logicQueueIds must list logical queue numbers (integers >= 0); got {raw!r}")
    return raw
