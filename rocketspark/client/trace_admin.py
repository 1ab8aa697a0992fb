"""A message's trace (``Admin.message_trace``): the events the brokers recorded of it
(:mod:`broker.trace`), in time order.

The message is found first, by either id, as ``admin query-msg --id`` finds it: that names its
broker, the log offset of its batch record and its place in it; its copies (sent back to a
retry or dead-letter topic, they keep its client id) are found by its client id. Each
record's events are then one key lookup in each broker's key index (the trace topic, key
``broker@offset``: a broker records what it sees of a record stored elsewhere under the same
key); those covering the message's place are kept.
"""

from __future__ import annotations

import json

from rocketspark.client.admin_core import ClientCore
from rocketspark.client.message_admin import copies_of, query_message_by_id
from rocketspark.errors import BrokerNotExistError
from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.trace import TRACE_TOPIC, TraceEvent, covers, events_of, record_key
from rocketspark.protocol.types import MessageExt

MAX_EVENTS = 1000  # trace messages read of one record (a broker answers at most this many)


def message_trace(core: ClientCore, msg_id: str) -> list[TraceEvent]:
    """The recorded events of the message with this id (client id or offset id) and of its
    copies (retries, dead letter), oldest first; empty when its topic is not traced (or none
    was recorded yet: events are stored within a fraction of a second, and indexed a second
    or so later)."""
    message = query_message_by_id(core, msg_id)
    brokers = core.cluster_list()["brokers"]
    addresses = [a for e in brokers.values() if (a := e.get("addr") or next(iter(e.get("replicas", ())), None))]
    if not addresses:
        raise BrokerNotExistError("no broker is registered with the nameservers; start a broker first")
    events: list[TraceEvent] = []
    for copy in copies_of(core, message):
        for address in addresses:  # events of a record are recorded where they happen
            events += _events_at(core, address, copy)
    order = {"sent": 0, "stored": 1}
    events.sort(key=lambda e: (e.time_ms, order.get(e.event, 2)))
    return events


def _events_at(core: ClientCore, address: str, message: MessageExt) -> list[TraceEvent]:
    """The events one broker recorded of ``message``'s record that are about ``message``."""
    key = record_key(message.broker_name, message.commitlog_offset)
    ext = {"topic": TRACE_TOPIC, "key": key, "maxNum": MAX_EVENTS}
    request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext)
    response = core.call(address, request, None, ResponseCode.QUERY_NOT_FOUND)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    events: list[TraceEvent] = []
    for fields in unpack(response.body)["messages"]:
        data = json.loads(MessageExt.from_wire(fields).body)
        if covers(data, message.batch_index):
            events += events_of(data, message.batch_index)
    return events
