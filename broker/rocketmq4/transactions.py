"""Transactions of 4.x producers: END_TRANSACTION, and the broker's CHECK_TRANSACTION_STATE
to a producer of a half message left open (RocketMQ's ``EndTransactionProcessor`` and
``AbstractTransactionalMessageCheckListener``).

A half message is held by the broker (``broker.rocketmq4.send``): its send's answer names it
(``queueOffset`` is its offset in the half topic, which Java's producer sends back as
``tranStateTableOffset``). END_TRANSACTION commits it (it is then stored in its topic) or rolls
it back; 0 (unknown) leaves it open, to be checked back. A check-back is pushed, oneway, on
the connection of a live producer of its producer group (``PGROUP``), with the half message
as a MessageExt record of its real topic; the producer answers with END_TRANSACTION.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from broker.rocketmq4.context import Dialect
from broker.rocketmq4.messages import to_record
from rocketspark.codec import ids
from rocketspark.errors import MalformedRequestError
from rocketspark.protocol.codes import Flag
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.properties import PRODUCER_GROUP, REAL_TOPIC
from rocketspark.protocol.types import MessageExt
from rocketspark.remoting import frame
from rocketspark.rocketmq4 import records
from rocketspark.rocketmq4.codes import Code
from rocketspark.rocketmq4.headers import Fields

log = logging.getLogger(__name__)

UNKNOWN, COMMIT, ROLLBACK = 0, 8, 12  # commitOrRollback (MessageSysFlag's transaction values)
_NAMES: Final = {UNKNOWN: "unknown", COMMIT: "commit", ROLLBACK: "rollback"}


async def handle_end(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    fields = Fields("END_TRANSACTION", request.ext)
    outcome = fields.integer("commitOrRollback")
    if outcome not in _NAMES:
        raise MalformedRequestError(f"END_TRANSACTION: commitOrRollback is {outcome}, not 0, 8 or 12")
    half_offset = fields.integer("tranStateTableOffset")
    msg_id = fields.text("msgId", "") or fields.text("transactionId", "")
    if outcome == UNKNOWN:
        log.info("4.x producer: transaction %s still unknown (%s); it will be checked back", msg_id, request.remark)
        return request.response()
    topic = fields.text("topic", "")
    if not topic:
        held = dialect.held.read_half(half_offset)
        topic = held.properties.get(REAL_TOPIC, "") if held is not None else ""
    await dialect.held.end(half_offset, topic, msg_id, outcome == COMMIT, request.user)
    return request.response()


def check_back(
    dialect: Dialect, loop: asyncio.AbstractEventLoop, topic: str, message: MessageExt, transaction_id: str
) -> bool:
    """Ask a live 4.x producer of the half message's group how its transaction ended; whether
    one was there to ask (from a worker thread: the push is made on the broker's loop)."""
    group = message.properties.get(PRODUCER_GROUP, "")
    producers = dialect.members.producers_of(group)
    if not producers:
        return False
    client_id = message.client_id or ""
    command = RemotingCommand.request(
        Code.CHECK_TRANSACTION_STATE,
        {
            "topic": topic,
            "tranStateTableOffset": message.queue_offset,
            "commitLogOffset": ids.physical_offset(message.commitlog_offset, message.batch_index),
            "msgId": client_id,
            "transactionId": client_id,
            "offsetMsgId": message.offset_msg_id,
            "bname": dialect.name,
        },
        records.encode(to_record(message, 0, topic)),
    )
    command.serialize = frame.JSON
    command.flag |= Flag.ONEWAY
    loop.call_soon_threadsafe(producers[0].channel.push, command)
    return True
