"""A message's trace (``Admin.message_trace``): the events the brokers recorded of it
(:mod:`broker.trace`), in time order.

The message is found first, by either id, as ``admin query-msg --id`` finds it: that names its
broker, the log offset of its batch record and its place in it; its copies (sent back to a
retry or dead-letter topic, they keep its client id) are found by its client id. Each
record's events are then one key lookup in each broker's key index (the trace topic, key
``broker@offset``: a broker records what it sees of a record stored elsewhere under the same
key); those covering the message's place are kept.

Pull consumers acknowledge by committing a queue's offset: for each group the message was
delivered to, the commits of that group on its queue are looked up minute by minute from the
delivery on (``commit_key``, at most ``ACK_SEARCH_MINUTES``), and the first past the message's
offset is its ``acknowledged (committed)`` event.
"""

from __future__ import annotations

import json
import time

from rocketspark.client.admin_core import ClientCore
from rocketspark.client.message_admin import copies_of, query_message_by_id
from rocketspark.errors import BrokerNotExistError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.trace import (
    COMMIT_BUCKET_MS,
    TRACE_TOPIC,
    TraceEvent,
    acknowledgement,
    commit_key,
    covers,
    events_of,
    record_key,
)
from rocketspark.protocol.types import MessageExt

MAX_EVENTS = 1000  # trace messages read of one record (a broker answers at most this many)
ACK_SEARCH_MINUTES = 10  # how long after a delivery its group's commit is looked for


def message_trace(core: ClientCore, msg_id: str) -> list[TraceEvent]:
    """The recorded events of the message with this id (client id or offset id) and of its
    copies (retries, dead letter), oldest first; empty when its topic is not traced (or none
    was recorded yet: events are stored within a fraction of a second, and indexed a second
    or so later)."""
    return trace_of(core, query_message_by_id(core, msg_id))


def trace_of(core: ClientCore, message: MessageExt) -> list[TraceEvent]:
    """:func:`message_trace` of a message already found (no second look-up by id)."""
    brokers = core.cluster_list()["brokers"]
    named = {n: a for n, e in brokers.items() if (a := e.get("addr") or next(iter(e.get("replicas", ())), None))}
    addresses = list(named.values())
    if not addresses:
        raise BrokerNotExistError("no broker is registered with the nameservers; start a broker first")
    events: list[TraceEvent] = []
    for copy in copies_of(core, message, brokers):
        for address in addresses:  # events of a record are recorded where they happen
            events += _events_at(core, address, copy)
    events += _acknowledgements(core, named, events)
    order = {"sent": 0, "stored": 1}
    events.sort(key=lambda e: (e.time_ms, order.get(e.event, 2)))
    return events


def _trace_messages(core: ClientCore, address: str, key: str) -> list[dict[str, object]]:
    """The decoded trace messages with ``key`` on the broker at ``address``."""
    ext = {"topic": TRACE_TOPIC, "key": key, "maxNum": MAX_EVENTS}
    request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext)
    response = core.call(address, request, None, ResponseCode.QUERY_NOT_FOUND)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    return [json.loads(MessageExt.from_wire(fields).body) for fields in unpack(response.body)["messages"]]


def _acknowledgements(core: ClientCore, addresses: dict[str, str], events: list[TraceEvent]) -> list[TraceEvent]:
    """For each (group, queue) the message was first delivered on by pull, the first commit
    past its offset, if one was recorded within ``ACK_SEARCH_MINUTES`` of the delivery."""
    firsts: dict[tuple[str, str, str, int], TraceEvent] = {}
    for event in events:
        pulled = event.event == "delivered" and not event.detail.startswith("by v2 pop")  # pop acks its own
        if pulled and event.group and event.broker in addresses:
            firsts.setdefault((event.broker, event.group, event.topic, event.queue_id), event)
    found, now_ms = [], time.time() * 1000
    for (broker, group, topic, queue_id), delivered in firsts.items():
        minute = delivered.time_ms // COMMIT_BUCKET_MS
        for bucket in range(minute, minute + ACK_SEARCH_MINUTES):
            if bucket * COMMIT_BUCKET_MS > now_ms:
                break
            key = commit_key(broker, topic, queue_id, group, bucket * COMMIT_BUCKET_MS)
            rows = [acknowledgement(f, delivered) for f in _trace_messages(core, addresses[broker], key)]
            acks = sorted((r for r in rows if r is not None), key=lambda r: r.time_ms)
            if acks:
                found.append(acks[0])
                break
    return found


def _events_at(core: ClientCore, address: str, message: MessageExt) -> list[TraceEvent]:
    """The events one broker recorded of ``message``'s record that are about ``message``."""
    key = record_key(message.broker_name, message.commitlog_offset)
    events: list[TraceEvent] = []
    for data in _trace_messages(core, address, key):
        if covers(data, message.batch_index):
            events += events_of(data, message.batch_index)
    return events
