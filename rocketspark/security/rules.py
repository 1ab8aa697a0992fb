"""What each request code needs: one table, ``RULES``, naming every code a server serves.

A rule is one of:

- ``CLUSTER_ONLY``: only the servers themselves, signed with the cluster credential (a broker
  registering, a replica's heartbeat, a slave copying its master); no user, not even a super
  user, may send it, so no process without the cluster secret can pose as a broker;
- ``SUPER_ONLY``: super users (and the cluster): user and policy changes;
- ``ANY_USER``: any user the server knows: what every client needs to work at all (opening its
  push stream, the brokers' addresses);
- ``needs(...)``: a function of the request's header fields giving the permissions it needs,
  e.g. a send needs Pub on ``Topic:<topic>``.

Registering a handler for a code missing here fails at start-up (``require``), as for
request shapes, so a new request cannot go unguarded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from rocketspark.protocol.bodies import unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import group_of
from rocketspark.security.acl import CLUSTER as CLUSTER_RESOURCE
from rocketspark.security.acl import Action, Need

CLUSTER: Final = "cluster"  # only the servers themselves
SUPER: Final = "super"  # super users (and the cluster)
SIGNED: Final = "signed"  # any user the server knows
NEEDS: Final = "needs"  # what ``needs`` of the request says


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    needs: Callable[[RemotingCommand], list[Need]] = lambda request: []


_SUB: Final = frozenset({Action.SUB})
_DATA: Final = frozenset({Action.PUB, Action.SUB, Action.GET})
CLUSTER_ONLY: Final = Rule(CLUSTER)
SUPER_ONLY: Final = Rule(SUPER)
ANY_USER: Final = Rule(SIGNED)


def topic_need(name: str, actions: frozenset[Action]) -> Need:
    """What ``actions`` on topic ``name`` need: a group's retry and dead-letter topics are the
    group's, so Sub on the group covers sending to, reading and looking them up (as in
    RocketMQ's ACL); changing or deleting them still needs the right on the topic itself."""
    group = group_of(name)
    if group is not None and actions <= _DATA:
        return Need(f"Group:{group}", _SUB)
    return Need(f"Topic:{name}", actions)


def topic(*actions: Action) -> Rule:
    wanted = frozenset(actions)
    return Rule(NEEDS, lambda r: [topic_need(r.ext["topic"], wanted)])


def send() -> Rule:
    """Pub on the topic; a send that may create it (it names the auto-create template,
    ``defaultTopic``) needs Create too, or Pub alone would create topics."""
    pub, create = frozenset({Action.PUB}), frozenset({Action.CREATE})

    def needs(r: RemotingCommand) -> list[Need]:
        name = r.ext["topic"]
        if r.ext.get("defaultTopic") and group_of(name) is None:
            return [Need(f"Topic:{name}", pub), Need(f"Topic:{name}", create)]
        return [topic_need(name, pub)]

    return Rule(NEEDS, needs)


def topic_and_group(*actions: Action) -> Rule:
    wanted = frozenset(actions)
    return Rule(NEEDS, lambda r: [topic_need(r.ext["topic"], wanted), Need(f"Group:{r.ext['consumerGroup']}", wanted)])


def group(*actions: Action) -> Rule:
    wanted = frozenset(actions)
    return Rule(NEEDS, lambda r: [Need(f"Group:{r.ext['consumerGroup']}", wanted)])


def member() -> Rule:
    """Sub on the consumer group a member heartbeats or leaves; a producer announcing its
    group needs nothing more than to be a user (RocketMQ checks producer heartbeats no further)."""
    wanted = frozenset({Action.SUB})
    return Rule(NEEDS, lambda r: [Need(f"Group:{g}", wanted)] if (g := r.ext.get("consumerGroup")) else [])


def topics(*actions: Action) -> Rule:
    wanted = frozenset(actions)
    return Rule(NEEDS, lambda r: [topic_need(t, wanted) for t in r.ext.get("topics") or ()])


def mapped_topic(*actions: Action) -> Rule:
    """A static topic's mapping change: the topic is in the body (checked by its shape already)."""
    wanted = frozenset(actions)
    return Rule(NEEDS, lambda r: [Need(f"Topic:{unpack(r.body)['mapping']['topic']}", wanted)])


def cluster(*actions: Action) -> Rule:
    need = [Need(CLUSTER_RESOURCE, frozenset(actions))]
    return Rule(NEEDS, lambda r: need)


_C = RequestCode
_READ = (Action.SUB, Action.GET)  # reading a topic's data or bounds
_LOOKUP = (Action.PUB, Action.SUB, Action.GET)  # a topic's route or config: producers and consumers need it
RULES: Final[dict[int, Rule]] = {
    # broker: data
    _C.SEND_MESSAGE: send(),
    _C.SEND_BATCH_MESSAGE: send(),
    _C.PULL_MESSAGE: topic(Action.SUB),
    _C.GET_MAX_OFFSET: topic(*_READ),
    _C.GET_MIN_OFFSET: topic(*_READ),
    _C.SEARCH_OFFSET_BY_TIMESTAMP: topic(*_READ),
    _C.GET_TOPIC_STATS_INFO: topic(*_READ),
    _C.GET_TOPIC_CONFIG: topic(*_LOOKUP),
    _C.QUERY_MESSAGE: topic(*_READ),
    _C.VIEW_MESSAGE_BY_ID: cluster(Action.GET),  # the topic is known only once the message is read
    # broker: consumer groups
    _C.QUERY_CONSUMER_OFFSET: topic_and_group(Action.SUB),
    _C.UPDATE_CONSUMER_OFFSET: topic_and_group(Action.SUB),
    _C.HEART_BEAT: member(),
    _C.UNREGISTER_CLIENT: member(),
    _C.LOCK_BATCH_MQ: topic_and_group(Action.SUB),
    _C.UNLOCK_BATCH_MQ: topic_and_group(Action.SUB),
    _C.GET_CONSUMER_LIST_BY_GROUP: group(Action.SUB, Action.GET),
    _C.GET_ALL_CONSUMER_OFFSET: cluster(Action.LIST, Action.GET),
    _C.GET_CONSUMER_CONNECTION_LIST: group(Action.GET),
    _C.GET_PRODUCER_CONNECTION_LIST: cluster(Action.GET),
    _C.GET_ALL_PRODUCER_INFO: cluster(Action.LIST, Action.GET),
    _C.INVOKE_BROKER_TO_RESET_OFFSET: topic_and_group(Action.UPDATE),
    # broker: administration
    _C.UPDATE_AND_CREATE_TOPIC: topic(Action.CREATE, Action.UPDATE),
    _C.UPDATE_AND_CREATE_STATIC_TOPIC: mapped_topic(Action.CREATE, Action.UPDATE),
    _C.SEAL_LOGIC_QUEUES: topic(Action.UPDATE),
    _C.DELETE_TOPIC_IN_BROKER: topic(Action.DELETE),
    _C.GET_ALL_TOPIC_CONFIG: cluster(Action.LIST, Action.GET),
    _C.GET_BROKER_RUNTIME_INFO: cluster(Action.GET),
    _C.UPDATE_BROKER_CONFIG: cluster(Action.UPDATE),
    _C.GET_COUNTERS: cluster(Action.GET),
    # broker: a slave copying its master
    _C.HA_GET_EPOCHS: CLUSTER_ONLY,
    _C.HA_GET_METADATA: CLUSTER_ONLY,
    # nameserver
    _C.REGISTER_BROKER: CLUSTER_ONLY,
    _C.UNREGISTER_BROKER: CLUSTER_ONLY,
    _C.QUERY_DATA_VERSION: CLUSTER_ONLY,
    _C.GET_ROUTEINFO_BY_TOPIC: topic(*_LOOKUP),
    _C.GET_BROKER_CLUSTER_INFO: ANY_USER,  # broker addresses: a reader needs them to find a moved broker
    _C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: cluster(Action.LIST),
    _C.DELETE_TOPIC_IN_NAMESRV: topic(Action.DELETE),
    _C.WIPE_WRITE_PERM_OF_BROKER: cluster(Action.UPDATE),
    _C.ADD_WRITE_PERM_OF_BROKER: cluster(Action.UPDATE),
    _C.OPEN_PUSH_STREAM: ANY_USER,
    _C.SUBSCRIBE_TOPIC_ROUTE: topics(*_LOOKUP),
    _C.UNSUBSCRIBE_TOPIC_ROUTE: ANY_USER,
    # nameserver: the controller
    _C.BROKER_HEARTBEAT: CLUSTER_ONLY,
    _C.CONTROLLER_REGISTER_BROKER: CLUSTER_ONLY,
    _C.CONTROLLER_ALTER_SYNC_STATE_SET: CLUSTER_ONLY,
    _C.CONTROLLER_ELECT_MASTER: cluster(Action.UPDATE),  # a planned switchover
    _C.CONTROLLER_GET_REPLICA_INFO: cluster(Action.GET),
    _C.CONTROLLER_GET_METADATA_INFO: cluster(Action.GET),
    _C.CONTROLLER_GET_SYNC_STATE_DATA: cluster(Action.GET),
    # both: users and policies
    _C.AUTH_GET_TABLE: SUPER_ONLY,
    _C.AUTH_PUT_TABLE: SUPER_ONLY,
}


def require(code: int) -> None:
    """Fail at registration for a request code with no permission rule."""
    if code not in RULES:
        raise ValueError(f"request code {code} has no permission rule in rocketspark.security.rules.RULES")
