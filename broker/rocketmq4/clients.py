"""A 4.x client's groups: HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP,
CHECK_CLIENT_CONFIG, and the queue locks of orderly consumers (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ).

A heartbeat joins each of its consumer groups as our own group consumers join (the group's
retry and dead-letter topics are created on its first heartbeat) and records its subscriptions;
when a group's members change, its 4.x members are told (NOTIFY_CONSUMER_IDS_CHANGED). An SQL92
subscription that does not compile is refused with the position of its error when the client
starts: by CHECK_CLIENT_CONFIG (Java's push consumer asks before it starts), else by its first
pull (ali-ons pulls at once); as in RocketMQ, the heartbeat itself still joins the group.
"""

from __future__ import annotations

import json
from typing import Any

from broker.connections import REMOTING, Subscribed, version_name
from broker.rocketmq4.context import Dialect
from broker.rocketmq4.members import SQL92, Subscription
from rocketspark.errors import MalformedRequestError
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.rocketmq4.headers import Fields


def _json_body(request: RemotingCommand, what: str) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedRequestError(f"{what}: the body is not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise MalformedRequestError(f"{what}: the body must be a JSON object")
    return body


def _subscriptions(data: dict[str, Any]) -> list[Subscription]:
    subscriptions = []
    for entry in data.get("subscriptionDataSet") or []:
        if not isinstance(entry, dict) or not entry.get("topic"):
            raise MalformedRequestError("HEART_BEAT: a subscription needs a topic")
        subscriptions.append(Subscription.of(str(entry["topic"]), entry.get("subString"), entry.get("expressionType")))
    return subscriptions


async def handle_heartbeat(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    body = _json_body(request, "HEART_BEAT")
    client_id = str(body.get("clientID") or "")
    if not client_id:
        raise MalformedRequestError('HEART_BEAT: the body needs a "clientID"')
    consumers: dict[str, list[Subscription]] = {}
    for data in body.get("consumerDataSet") or []:
        if not isinstance(data, dict) or not data.get("groupName"):
            raise MalformedRequestError("HEART_BEAT: a consumer entry needs a groupName")
        consumers[str(data["groupName"])] = _subscriptions(data)
    producers = {
        str(p["groupName"]) for p in body.get("producerDataSet") or [] if isinstance(p, dict) and p.get("groupName")
    }
    dialect.members.heartbeat(client_id, request.channel, consumers, producers)
    subscribed = {g: [Subscribed(s.topic, s.expression_type, s.expression) for s in ss] for g, ss in consumers.items()}
    dialect.connections.heard(
        client_id,
        address=getattr(request.channel, "peer", ""),
        language=request.language or "JAVA",
        version=version_name(request.version),
        protocol=REMOTING,
        channel=request.channel,
        consumers=subscribed,
        producers=producers,
        version_code=request.version,
    )
    for group in consumers:
        before = dialect.groups.members(group)
        await dialect.queues.ours(RequestCode.HEART_BEAT, {"consumerGroup": group, "clientId": client_id}, request.user)
        after = dialect.groups.members(group)
        if after != before:
            dialect.members.notify_changed(group, after)
    return request.response()


async def handle_unregister(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    fields = Fields("UNREGISTER_CLIENT", request.ext)
    client_id = fields.text("clientID")
    group = fields.text("consumerGroup", "")
    producer = fields.text("producerGroup", "") or None
    dialect.members.unregister(client_id, group or None, producer)
    dialect.connections.leave(client_id, group or None, producer)
    if group:
        await dialect.queues.ours(
            RequestCode.UNREGISTER_CLIENT, {"consumerGroup": group, "clientId": client_id}, request.user
        )
        dialect.members.notify_changed(group, dialect.groups.members(group))
    return request.response()


async def handle_consumer_list(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    group = Fields("GET_CONSUMER_LIST_BY_GROUP", request.ext).text("consumerGroup")
    answer = await dialect.queues.ours(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}, request.user)
    return request.response(body=json.dumps({"consumerIdList": list(answer.ext["members"])}).encode())


async def handle_check_client_config(dialect: Dialect, request: RemotingCommand) -> RemotingCommand:
    """A Java push consumer's check, at start, of a subscription other than by tag."""
    body = _json_body(request, "CHECK_CLIENT_CONFIG")
    group = str(body.get("group") or "")
    dialect.queues.authorize(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}, request.user)
    data = body.get("subscriptionData") or {}
    if isinstance(data, dict) and data.get("topic"):
        for subscription in _subscriptions({"subscriptionDataSet": [data]}):
            if subscription.expression_type == SQL92:
                dialect.filters.selector(subscription.expression)  # refused here, at the client's start
    return request.response()


async def handle_lock(dialect: Dialect, request: RemotingCommand, *, lock: bool) -> RemotingCommand:
    """An orderly consumer's locks on queues: granted ones are answered (``lockOKMQSet``)."""
    body = _json_body(request, "LOCK_BATCH_MQ" if lock else "UNLOCK_BATCH_MQ")
    group, client_id = str(body.get("consumerGroup") or ""), str(body.get("clientId") or "")
    if not group or not client_id:
        raise MalformedRequestError("a queue lock request needs consumerGroup and clientId")
    granted = []
    for mq in body.get("mqSet") or []:
        if not isinstance(mq, dict):
            raise MalformedRequestError("mqSet holds message queues {brokerName, queueId, topic}")
        ext = {
            "consumerGroup": group,
            "clientId": client_id,
            "topic": str(mq.get("topic")),
            "queueId": int(mq.get("queueId", -1)),
        }
        code = RequestCode.LOCK_BATCH_MQ if lock else RequestCode.UNLOCK_BATCH_MQ
        holder = await dialect.queues.lock(code, ext, request.user)
        if lock and holder == client_id:
            granted.append(mq)
    if not lock:
        return request.response()
    return request.response(body=json.dumps({"lockOKMQSet": granted}).encode())
