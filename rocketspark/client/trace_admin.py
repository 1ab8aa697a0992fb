"""A message's trace (``Admin.message_trace``): the events the brokers recorded of it
(:mod:`broker.trace`), in time order.

The message is found first, by either id, as ``admin query-msg --id`` finds it: that names its
broker, the log offset of its batch record and its place in it. The record's events are then
one key lookup in that broker's key index (the trace topic, key ``broker@offset``); those
covering the message's place are kept.
"""

from __future__ import annotations

import json

from rocketspark.client.admin_core import ClientCore
from rocketspark.client.message_admin import query_message_by_id
from rocketspark.errors import BrokerNotExistError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.trace import TRACE_TOPIC, TraceEvent, covers, events_of, record_key
from rocketspark.protocol.types import MessageExt

MAX_EVENTS = 1000  # trace messages read of one record (a broker answers at most this many)


def message_trace(core: ClientCore, msg_id: str) -> list[TraceEvent]:
    """The recorded events of the message with this id (client id or offset id), oldest
    first; empty when its topic is not traced (or none was recorded yet: events are stored
    within a fraction of a second, and indexed a second or so later)."""
    message = query_message_by_id(core, msg_id)
    return trace_of(core, message)


def trace_of(core: ClientCore, message: MessageExt) -> list[TraceEvent]:
    """The recorded events of ``message`` (as a look-up or a consumer got it)."""
    entry = core.cluster_list()["brokers"].get(message.broker_name) or {}
    address = entry.get("addr") or next(iter(entry.get("replicas", ())), None)
    if not address:
        raise BrokerNotExistError(
            f"broker {message.broker_name}, which stores the message, has no registered address; it may be down"
        )
    ext = {"topic": TRACE_TOPIC, "key": record_key(message.broker_name, message.commitlog_offset), "maxNum": MAX_EVENTS}
    request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext)
    response = core.call(address, request, None, ResponseCode.QUERY_NOT_FOUND)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    events: list[TraceEvent] = []
    for fields in unpack(response.body)["messages"]:
        trace = MessageExt.from_wire(fields)
        data = json.loads(trace.body)
        if covers(data, message.batch_index):
            events += events_of(data, message.batch_index)
    order = {"sent": 0, "stored": 1}
    events.sort(key=lambda e: (e.time_ms, order.get(e.event, 2)))
    return events
