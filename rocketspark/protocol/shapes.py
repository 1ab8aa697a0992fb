"""The declared shape of every request, checked at the edge before any handler runs.

A handler trusts what it reads. It once did not need to be told otherwise: a REGISTER_BROKER
whose broker name was a number was answered SUCCESS, and from then on every route query of
its topics failed with a TypeError, for every client. So both servers' dispatchers call
``check`` on each request first, against one table, ``SHAPES``, which names every request
code the broker and the nameserver serve:

- the header fields (the command's ``ext`` map): types, ranges, string and list lengths;
- the body: a msgpack body (a broker's registration, a static topic's mapping) is decoded
  against its declared shape; a binary body (a send batch) is left to its handler, which
  checks every record with :mod:`rocketspark.codec.ingest`; every other request has none.

A field that breaks its shape is an ``InvalidParameterError`` (INVALID_PARAMETER) whose
message names the request, the field and what is allowed; a body that is not msgpack at all
is a ``MalformedRequestError``. Fields not declared are ignored, as RocketMQ ignores unknown
``extFields``. Registering a handler for a code missing from the table fails at start-up
(``require``), so a new request cannot skip the check.

Limits: queue ids 0-1023 (a topic has at most ``MAX_QUEUES`` queues, as
``broker.topics.MAX_QUEUES``); ``queueId`` -1 on a send means "the broker picks", and
``logicQueueId``, ``gen``, ``epoch`` and ``endOffset`` may be -1 for "none"; offsets are
0..2^63-1; names (brokers, clusters, groups) at most 255 characters, client ids 512; topic
names follow :mod:`rocketspark.protocol.validation`; a request lists at most
``MAX_TOPICS_PER_REQUEST`` topics (clients send more in several requests), and a broker's
registration at most ``MAX_TOPICS_PER_BROKER``. Replica ids of a group are 0-1023, at most
``MAX_REPLICAS`` to a SyncStateSet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Final

import msgspec
from msgspec import Meta, Struct

from rocketspark.errors import InvalidParameterError, MalformedRequestError
from rocketspark.filtering import MAX_EXPRESSION_CHARS
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.validation import TOPIC_NAME_MAX, TOPIC_NAME_PATTERN

MAX_QUEUES: Final = 1024
MAX_TOPICS_PER_REQUEST: Final = 1024
MAX_TOPICS_PER_BROKER: Final = 65_536
MAX_TAGS: Final = 256
NAME_MAX: Final = 255
CLIENT_ID_MAX: Final = 512
I64_MAX: Final = 2**63 - 1
I32_MAX: Final = 2**31 - 1
ADDRESS_PATTERN: Final = r"^\S+:[0-9]{1,5}$"
QUEUE_KEY_PATTERN: Final = r"^(?:0|[1-9][0-9]{0,2}|10[01][0-9]|102[0-3])$"  # "0" to "1023", no leading zeros
MAX_REPLICAS: Final = 64  # replicas of one group in a controller request

Topic = Annotated[str, Meta(min_length=1, max_length=TOPIC_NAME_MAX, pattern=TOPIC_NAME_PATTERN)]
Topics = Annotated[list[Topic], Meta(max_length=MAX_TOPICS_PER_REQUEST)]
Name = Annotated[str, Meta(min_length=1, max_length=NAME_MAX)]
ClientId = Annotated[str, Meta(min_length=1, max_length=CLIENT_ID_MAX)]
Address = Annotated[str, Meta(max_length=NAME_MAX, pattern=ADDRESS_PATTERN)]
QueueId = Annotated[int, Meta(ge=0, le=MAX_QUEUES - 1)]
QueueIdOrNone = Annotated[int, Meta(ge=-1, le=MAX_QUEUES - 1)]  # -1: none (a send: the broker picks)
QueueCount = Annotated[int, Meta(ge=1, le=MAX_QUEUES)]
Perm = Annotated[int, Meta(ge=0, le=7)]  # bits 4 read, 2 write, 1 inherit
Offset = Annotated[int, Meta(ge=0, le=I64_MAX)]
OffsetOrNone = Annotated[int, Meta(ge=-1, le=I64_MAX)]  # gens, epochs, end offsets, times: -1 is none
Count = Annotated[int, Meta(ge=0, le=I32_MAX)]
Tag = Annotated[str, Meta(max_length=NAME_MAX)]
QueueKey = Annotated[str, Meta(pattern=QUEUE_KEY_PATTERN)]  # a map key naming a logical queue
ReplicaId = Annotated[int, Meta(ge=0, le=MAX_QUEUES - 1)]  # a replica of a group: 0-1023, as in HA requests

# Readable versions of constraints whose msgspec wording is a regex.
_ALLOWED = {
    f"matching regex {TOPIC_NAME_PATTERN!r}": (
        f'of 1-{TOPIC_NAME_MAX} letters, digits, "_", "-", "%" and "|" (a legal topic name)'
    ),
    f"matching regex {ADDRESS_PATTERN!r}": "of the form host:port",
    f"matching regex {QUEUE_KEY_PATTERN!r}": "naming a logical queue, 0-1023",
}


class Shape(Struct, rename="camel"):
    """Base of the header and body shapes: camelCase on the wire, snake_case here."""


# -- headers ---------------------------------------------------------------------------------


class NoFields(Shape):
    pass


class TopicHeader(Shape):
    topic: Topic


class BrokerHeader(Shape):
    broker_name: Name


class SendHeader(Shape):
    topic: Topic
    queue_id: QueueIdOrNone = -1
    default_topic: Topic | None = None
    default_topic_queue_nums: QueueCount = 4
    logic_queue_id: QueueIdOrNone = -1
    epoch: OffsetOrNone = -1
    producer_id: Annotated[str, Meta(max_length=NAME_MAX)] = ""
    seq: Offset = 0


class PullHeader(Shape):
    topic: Topic
    queue_id: QueueId
    queue_offset: Offset
    max_msg_nums: Count = 32  # the broker reads at least 1 and at most 65,536
    max_bytes: Annotated[int, Meta(ge=1, le=I64_MAX)] | None = None
    suspend_timeout_ms: Count = 0
    tags: Annotated[list[Tag], Meta(max_length=MAX_TAGS)] = []
    sql: Annotated[str, Meta(max_length=MAX_EXPRESSION_CHARS)] | None = None  # an SQL92 filter expression
    end_offset: OffsetOrNone = -1
    logic_queue_id: QueueIdOrNone = -1
    gen: OffsetOrNone = -1
    epoch: OffsetOrNone = -1


class QueryMessageHeader(Shape):
    topic: Topic
    key: Annotated[str, Meta(min_length=1, max_length=NAME_MAX)]
    max_num: Count = 32


class ViewByIdHeader(Shape):
    offset: OffsetOrNone = -1  # a physical offset (an offset id's position), as RocketMQ's request has it
    msg_id: Annotated[str, Meta(max_length=NAME_MAX)] = ""  # or (ours) a client id, through the key index
    max_num: Count = 32


class ResetOffsetHeader(Shape):
    consumer_group: Name
    topic: Topic


class ResetOffsetBody(Shape):
    version: Offset  # the reset's id, the same on every broker: consumers apply each one once
    offsets: Annotated[dict[QueueKey, Offset], Meta(max_length=MAX_QUEUES)]


class QueueHeader(Shape):
    topic: Topic
    queue_id: QueueId


class SearchHeader(QueueHeader):
    timestamp: Offset


class GroupOffsetHeader(Shape):
    consumer_group: Name
    topic: Topic
    queue_id: QueueId
    logical: bool = False
    logic_queue_id: QueueIdOrNone = -1
    gen: OffsetOrNone = -1
    epoch: OffsetOrNone = -1


class CommitHeader(GroupOffsetHeader):
    commit_offset: Offset = 0
    reset_version: OffsetOrNone = -1  # the last offset reset the committer applied; -1: not a group consumer


class CreateTopicHeader(Shape):
    topic: Topic
    write_queue_nums: QueueCount = 8
    read_queue_nums: QueueCount = 8
    perm: Perm = 6


class BrokerConfigHeader(Shape):
    broker_permission: Perm


class HaEpochsHeader(Shape):
    master_epoch: Offset


class SealHeader(Shape):
    topic: Topic
    logic_queue_ids: Annotated[list[QueueId], Meta(max_length=MAX_QUEUES)]


class GroupHeader(Shape):
    consumer_group: Name


class MemberHeader(GroupHeader):
    client_id: ClientId
    topics: Topics = []
    # topic -> the last admin reset id the member applied or learnt (HEART_BEAT)
    resets_seen: Annotated[dict[Topic, Offset], Meta(max_length=MAX_TOPICS_PER_REQUEST)] = {}


class QueueLockHeader(Shape):
    """A group member's lock on a queue, addressed as a group offset is."""

    consumer_group: Name
    client_id: ClientId
    topic: Topic
    queue_id: QueueId
    logical: bool = False
    logic_queue_id: QueueIdOrNone = -1
    gen: OffsetOrNone = -1
    epoch: OffsetOrNone = -1


class RegisterHeader(Shape):
    broker_name: Name | None = None
    cluster_name: Name | None = None


class DataVersionHeader(BrokerHeader):
    """QUERY_DATA_VERSION: does the nameserver hold this broker's registration at this version?"""

    cluster_name: Name
    addr: Address
    version: Offset


class UnregisterHeader(BrokerHeader):
    cluster_name: Name | None = None
    addr: Address | None = None


class ClientHeader(Shape):
    client_id: ClientId


class SubscribeHeader(ClientHeader):
    topics: Topics


class UnsubscribeHeader(ClientHeader):
    topics: Topics | None = None  # none: every topic of the client


class ReplicaHeader(Shape):
    """A replica of a group, as it registers with the controller (and heartbeats)."""

    broker_name: Name
    cluster_name: Name
    replica_id: ReplicaId
    address: Address
    max_offset: Offset = 0  # the replica's commit-log end
    master_epoch: OffsetOrNone = -1  # the master epoch it believes in
    fresh: bool = False  # a registration: the process's first (it has just started)


class BrokerHeartbeatHeader(ReplicaHeader):
    """BROKER_HEARTBEAT: a replica's log end and epoch, every controller_heartbeat_interval_ms."""

    master_unreachable: bool = False  # a slave whose master's port refuses connections


class AlterSyncStateSetHeader(Shape):
    broker_name: Name
    master_replica_id: ReplicaId
    master_epoch: Offset
    sync_state_set: Annotated[list[ReplicaId], Meta(min_length=1, max_length=MAX_REPLICAS)]
    sync_state_set_epoch: OffsetOrNone = -1  # -1: not checked


class ElectMasterHeader(Shape):
    broker_name: Name
    replica_id: ReplicaId  # the replica to hand the group over to


class GroupNamesHeader(Shape):
    broker_names: Annotated[list[Name], Meta(max_length=MAX_TOPICS_PER_REQUEST)] | None = None  # none: all


# -- msgpack bodies --------------------------------------------------------------------------

# [gen, queue_id, bname, logic_offset, start_offset, end_offset, time_of_start, time_of_end]
MappingItem = tuple[Offset, QueueId, Name, Offset, Offset, OffsetOrNone, OffsetOrNone, OffsetOrNone]


class MappingDetail(Shape):
    """A broker's ``TopicQueueMappingDetail`` (see :mod:`rocketspark.protocol.static_mapping`)."""

    topic: Topic
    total_queues: QueueCount
    bname: Name
    epoch: Offset
    scope: Name = "__global__"
    hosted_queues: Annotated[
        dict[QueueKey, Annotated[list[MappingItem], Meta(min_length=1, max_length=MAX_QUEUES)]],
        Meta(max_length=MAX_QUEUES),
    ] = {}


class TopicConfigWire(Struct):
    name: Topic
    r: QueueCount
    w: QueueCount
    perm: Perm


class Registration(Shape):
    """REGISTER_BROKER's body: ``broker.server.Broker.registration``."""

    broker: Name
    cluster: Name
    addr: Address
    perm: Perm = 6
    version: Offset = 0
    topics: Annotated[list[TopicConfigWire], Meta(max_length=MAX_TOPICS_PER_BROKER)] = []
    static: Annotated[list[MappingDetail], Meta(max_length=MAX_TOPICS_PER_BROKER)] = []
    changed: Annotated[list[Topic], Meta(max_length=MAX_TOPICS_PER_BROKER)] = []
    incremental: bool = False  # only these topics; the nameserver keeps the broker's others


class StaticTopicBody(Shape):
    mapping: MappingDetail
    force: bool = False
    # idempotent producers' sequences of the queues this broker takes over (broker.dedupe rows)
    producers: list[Annotated[list[int | str | float], Meta(min_length=7, max_length=7)]] = []


# -- the table -------------------------------------------------------------------------------


class UserWire(Struct):
    name: Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
    secret: Annotated[str, Meta(min_length=1, max_length=1024)]
    type: Annotated[str, Meta(pattern=r"^(Super|Normal)$")]
    policies: Annotated[
        list[tuple[Annotated[str, Meta(max_length=NAME_MAX + 6)], list[str], str]], Meta(max_length=10_000)
    ] = []


class AclTableBody(Shape):
    version: Offset
    users: Annotated[list[UserWire], Meta(max_length=100_000)]


@dataclass(frozen=True, slots=True)
class RequestShape:
    header: type[Shape]
    body: type[Shape] | None = None  # a msgpack body of this shape; None: no body
    binary_body: bool = False  # a body its handler decodes and checks

    def check_body(self, request: RemotingCommand) -> None:
        if self.binary_body:
            return
        if self.body is None:
            if request.body:
                raise InvalidParameterError(
                    f"{_name(request.code)} carries no body; this one has {len(request.body)} bytes"
                )
            return
        try:
            msgspec.msgpack.decode(request.body, type=self.body, strict=True)
        except msgspec.ValidationError as exc:
            raise InvalidParameterError(_explain(request.code, "body", str(exc), None)) from None
        except msgspec.DecodeError as exc:
            raise MalformedRequestError(f"{_name(request.code)} body is not valid msgpack: {exc}") from None


_C = RequestCode
SHAPES: Final[dict[int, RequestShape]] = {
    # broker
    _C.SEND_MESSAGE: RequestShape(SendHeader, binary_body=True),
    _C.SEND_BATCH_MESSAGE: RequestShape(SendHeader, binary_body=True),
    _C.PULL_MESSAGE: RequestShape(PullHeader),
    _C.QUERY_MESSAGE: RequestShape(QueryMessageHeader),
    _C.VIEW_MESSAGE_BY_ID: RequestShape(ViewByIdHeader),
    _C.GET_ALL_CONSUMER_OFFSET: RequestShape(NoFields),
    _C.INVOKE_BROKER_TO_RESET_OFFSET: RequestShape(ResetOffsetHeader, ResetOffsetBody),
    _C.GET_MAX_OFFSET: RequestShape(QueueHeader),
    _C.GET_MIN_OFFSET: RequestShape(QueueHeader),
    _C.SEARCH_OFFSET_BY_TIMESTAMP: RequestShape(SearchHeader),
    _C.QUERY_CONSUMER_OFFSET: RequestShape(GroupOffsetHeader),
    _C.UPDATE_CONSUMER_OFFSET: RequestShape(CommitHeader),
    _C.UPDATE_AND_CREATE_TOPIC: RequestShape(CreateTopicHeader),
    _C.DELETE_TOPIC_IN_BROKER: RequestShape(TopicHeader),
    _C.GET_ALL_TOPIC_CONFIG: RequestShape(NoFields),
    _C.GET_TOPIC_CONFIG: RequestShape(TopicHeader),
    _C.GET_TOPIC_STATS_INFO: RequestShape(TopicHeader),
    _C.GET_BROKER_RUNTIME_INFO: RequestShape(NoFields),
    _C.UPDATE_BROKER_CONFIG: RequestShape(BrokerConfigHeader),
    _C.HEART_BEAT: RequestShape(MemberHeader),
    _C.UNREGISTER_CLIENT: RequestShape(MemberHeader),
    _C.LOCK_BATCH_MQ: RequestShape(QueueLockHeader),
    _C.UNLOCK_BATCH_MQ: RequestShape(QueueLockHeader),
    _C.GET_CONSUMER_LIST_BY_GROUP: RequestShape(GroupHeader),
    _C.UPDATE_AND_CREATE_STATIC_TOPIC: RequestShape(NoFields, StaticTopicBody),
    _C.SEAL_LOGIC_QUEUES: RequestShape(SealHeader),
    _C.HA_GET_EPOCHS: RequestShape(HaEpochsHeader),
    _C.HA_GET_METADATA: RequestShape(NoFields),
    # both
    _C.GET_COUNTERS: RequestShape(NoFields),
    _C.AUTH_GET_TABLE: RequestShape(NoFields),
    _C.AUTH_PUT_TABLE: RequestShape(NoFields, AclTableBody),
    # nameserver
    _C.REGISTER_BROKER: RequestShape(RegisterHeader, Registration),
    _C.UNREGISTER_BROKER: RequestShape(UnregisterHeader),
    _C.QUERY_DATA_VERSION: RequestShape(DataVersionHeader),
    _C.GET_ROUTEINFO_BY_TOPIC: RequestShape(TopicHeader),
    _C.GET_BROKER_CLUSTER_INFO: RequestShape(NoFields),
    _C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: RequestShape(NoFields),
    _C.DELETE_TOPIC_IN_NAMESRV: RequestShape(TopicHeader),
    _C.WIPE_WRITE_PERM_OF_BROKER: RequestShape(BrokerHeader),
    _C.ADD_WRITE_PERM_OF_BROKER: RequestShape(BrokerHeader),
    _C.OPEN_PUSH_STREAM: RequestShape(ClientHeader),
    _C.SUBSCRIBE_TOPIC_ROUTE: RequestShape(SubscribeHeader),
    _C.UNSUBSCRIBE_TOPIC_ROUTE: RequestShape(UnsubscribeHeader),
    # nameserver: the replica-group controller
    _C.BROKER_HEARTBEAT: RequestShape(BrokerHeartbeatHeader),
    _C.CONTROLLER_REGISTER_BROKER: RequestShape(ReplicaHeader),
    _C.CONTROLLER_ALTER_SYNC_STATE_SET: RequestShape(AlterSyncStateSetHeader),
    _C.CONTROLLER_ELECT_MASTER: RequestShape(ElectMasterHeader),
    _C.CONTROLLER_GET_REPLICA_INFO: RequestShape(BrokerHeader),
    _C.CONTROLLER_GET_METADATA_INFO: RequestShape(NoFields),
    _C.CONTROLLER_GET_SYNC_STATE_DATA: RequestShape(GroupNamesHeader),
}


def require(code: int) -> None:
    """Fail at registration for a request code with no declared shape."""
    if code not in SHAPES:
        raise ValueError(f"request code {code} has no declared shape in rocketspark.protocol.shapes.SHAPES")


def check(request: RemotingCommand) -> None:
    """Raise InvalidParameterError (or MalformedRequestError) if the request breaks its shape.
    A code with no shape is left alone: the dispatcher refuses it as unsupported."""
    shape = SHAPES.get(request.code)
    if shape is None:
        return
    try:
        msgspec.convert(request.ext, type=shape.header, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidParameterError(_explain(request.code, "header", str(exc), request.ext)) from None
    shape.check_body(request)


def _name(code: int) -> str:
    try:
        return f"{RequestCode(code).name} ({code})"
    except ValueError:
        return f"request {code}"


_AT = re.compile(r"^(?P<what>.*) - at (?P<path>.+)$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`(?: - at (?P<path>.+))?$")


def _explain(code: int, part: str, error: str, fields: dict[str, Any] | None) -> str:
    """msgspec's "Expected `int` >= 0 - at `$.queueId`" as a sentence naming the request."""
    for raw, readable in _ALLOWED.items():
        error = error.replace(raw, readable)
    missing = _MISSING.match(error)
    if missing:
        field = _path(missing["path"], missing["field"]) if missing["path"] else missing["field"]
        return f'{_name(code)}: the {part} field "{field}" is required'
    found = _AT.match(error)
    if found is None:  # the whole body (or header map) has the wrong type
        return f"{_name(code)}: the {part} is invalid: {_lower(error)}"
    path, what = _path(found["path"]), found["what"]
    got = ""
    if fields is not None and path in fields and ", got" not in what:
        got = f", got {_show(fields[path])}"
    return f'{_name(code)}: the {part} field "{path}" is invalid: {_lower(what)}{got}'


def _show(value: object) -> str:
    if isinstance(value, list | dict):
        return f"{len(value)} items"
    return f"{value!r:.60}"


def _path(raw: str, field: str | None = None) -> str:
    """ "`$.topics[3].name`" -> "topics[3].name"; "`key` in `$.hostedQueues`" -> "hostedQueues (a key)"."""
    key_in = raw.startswith("`key` in ")
    path = raw.removeprefix("`key` in ").strip("`").removeprefix("$").removeprefix(".")
    if field is not None:
        path = f"{path}.{field}" if path else field
    return f"{path} (a key)" if key_in else path


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]
