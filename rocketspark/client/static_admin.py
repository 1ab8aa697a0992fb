"""Static topics for the operator: create, remap (move or add queues), drain a broker.

A remap never copies data. For each moved logical queue the old leader segment is sealed at
its current end (the broker refuses writes past it from then on), a new segment is opened on
the target broker at the old end rounded up to the next 10,000 block, and every broker that
holds a segment of the queue learns the new mapping under a new epoch. The old segment stays
readable (ReadOnly) until retention empties it (Expired); then its leader drops it. On its
own::

    from rocketspark.client.admin_core import AdminConnection
    from rocketspark.client.static_admin import StaticTopics

    with AdminConnection("127.0.0.1:9876") as connection:
        static = StaticTopics(connection)
        static.create("orders", 8, brokers=["broker-a"])
        static.remap("orders", [0, 1], "broker-b")
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from rocketspark.client import static_plan
from rocketspark.client.admin_core import QueueCore
from rocketspark.client.server_admin import Servers
from rocketspark.client.topic_admin import DEFAULT_QUEUES, broker_topic_config
from rocketspark.errors import (
    BrokerNotExistError,
    InvalidParameterError,
    RocketSparkError,
    TopicExistAlreadyError,
    TopicNotExistError,
)
from rocketspark.protocol.bodies import pack, unpack
from rocketspark.protocol.codes import RequestCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.group_topics import LOGICAL_PREFIX, split_progress_key
from rocketspark.protocol.static_mapping import TopicQueueMappingDetail, merge_details, new_epoch
from rocketspark.protocol.validation import validate_topic_name

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RemapResult:
    topic: str
    epoch: int
    total_queues: int
    moved: list[tuple[int, str, str, int]] = field(default_factory=list)  # (queue, from, to, new start)
    added: list[tuple[int, str]] = field(default_factory=list)  # (queue, broker)


@dataclass
class _State:
    """A static topic as every broker sees it."""

    topic: str
    brokers: dict[str, str]  # every registered broker: name -> address
    details: dict[str, TopicQueueMappingDetail]
    normal_on: list[str]  # brokers where the name is a normal topic

    @property
    def exists(self) -> bool:
        return bool(self.details)

    def queues(self) -> static_plan.Queues:
        merged = merge_details(self.topic, list(self.details.values()))
        return dict(merged.queues) if merged else {}

    @property
    def epoch(self) -> int:
        return max((d.epoch for d in self.details.values()), default=0)

    @property
    def total(self) -> int:
        return max((d.total_queues for d in self.details.values() if d.epoch == self.epoch), default=0)


def read_state(core: QueueCore, topic: str, brokers: dict[str, str] | None = None) -> _State:
    """The topic as every registered broker (``brokers``, else asked for now) has it."""
    brokers = core.brokers() if brokers is None else brokers
    details: dict[str, TopicQueueMappingDetail] = {}
    normal: list[str] = []
    for name, address in sorted(brokers.items()):
        body = broker_topic_config(core, address, topic)
        if body is None:
            continue
        if body.get("mapping"):
            details[name] = TopicQueueMappingDetail.from_wire(body["mapping"])
        else:
            normal.append(name)
    return _State(topic, brokers, details, normal)


def _write(
    core: QueueCore,
    state: _State,
    details: dict[str, TopicQueueMappingDetail],
    first: list[str],
    producers: dict[str, list[list[Any]]] | None = None,
) -> None:
    """Send every broker its detail, the brokers in ``first`` before the others; with each,
    the idempotent producers' sequences of the queues it takes over (``producers``)."""
    order = [b for b in first if b in details] + [b for b in sorted(details) if b not in first]
    for name in order:
        address = state.brokers.get(name)
        if address is None:
            raise BrokerNotExistError(
                f"broker {name} holds segments of {state.topic} but is not registered; start it and retry"
            )
        body = pack({"mapping": details[name].to_wire(), "producers": (producers or {}).get(name, [])})
        core.call(address, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC, {}, body))
    core.forget_route(state.topic)


def create_static_topic(core: QueueCore, topic: str, queues: int, brokers: list[str] | None) -> RemapResult:
    validate_topic_name(topic)
    if queues < 1:
        raise InvalidParameterError(f"a static topic needs at least one logical queue, not {queues}")
    state = read_state(core, topic)
    if state.normal_on:
        raise TopicExistAlreadyError(
            f'"{topic}" is already a normal topic on {", ".join(state.normal_on)}; a static topic needs a name of its '
            "own (or delete the normal topic first)"
        )
    if state.exists:
        raise TopicExistAlreadyError(
            f'static topic "{topic}" already exists with {state.total} logical queues; raise the count with '
            f"remap_static_topic({topic!r}, total_queues=...)"
        )
    targets = _check_brokers(state, brokers or sorted(state.brokers))
    planned = static_plan.add_queues({}, queues, targets, {})
    epoch = new_epoch(0)
    _write(core, state, static_plan.details_for(topic, queues, epoch, planned, targets), [])
    return RemapResult(topic, epoch, queues, added=[(q, items[-1].bname) for q, items in sorted(planned.items())])


def _check_brokers(state: _State, names: list[str]) -> list[str]:
    missing = [n for n in names if n not in state.brokers]
    if missing:
        raise BrokerNotExistError(
            f"unknown broker(s) {', '.join(missing)}; registered brokers: {', '.join(sorted(state.brokers)) or 'none'}"
        )
    if not names:
        raise BrokerNotExistError("no broker is registered with the nameserver; start a broker first")
    return names


def _require(state: _State) -> None:
    if not state.exists:
        if state.normal_on:
            raise InvalidParameterError(f'"{state.topic}" is a normal topic; only static topics can be remapped')
        raise TopicNotExistError(f'static topic "{state.topic}" does not exist')


def remap_static_topic(
    core: QueueCore, topic: str, queues: list[int] | None, to_broker: str | None, total_queues: int | None
) -> RemapResult:
    state = read_state(core, topic)
    _require(state)
    current = state.queues()
    total = state.total
    if total_queues is not None and total_queues < total:
        raise InvalidParameterError(
            f"cannot lower the queue count of static topic {topic} from {total} to {total_queues}: logical queues "
            "are fixed for the topic's life (create a new topic for fewer queues)"
        )
    if to_broker is not None:
        _check_brokers(state, [to_broker])
    bad = [q for q in queues or [] if not 0 <= q < total]
    if bad:
        raise InvalidParameterError(
            f"logical queue(s) {', '.join(map(str, bad))} out of range: {topic} has queues 0-{total - 1}"
        )
    if queues and to_broker is None:
        raise InvalidParameterError("remapping queues needs to_broker, the broker that takes them over")
    moves = {q: to_broker for q in queues or [] if to_broker and current.get(q) and current[q][-1].bname != to_broker}
    return _apply(core, state, current, moves, total_queues or total, to_broker)


def _apply(
    core: QueueCore, state: _State, current: static_plan.Queues, moves: dict[int, str], total: int, new_home: str | None
) -> RemapResult:
    """Seal the moved queues' leaders, plan the new mapping, write it; new leaders first."""
    if not moves and total == state.total:
        return RemapResult(state.topic, state.epoch, total)  # nothing to change
    ends, sequences = _seal(core, state, current, list(moves))
    next_ids = static_plan.next_queue_ids(state.details.values(), current)
    planned = static_plan.move_queues(current, moves, ends, next_ids)
    home = (
        [new_home] if new_home else sorted({i.bname for items in planned.values() for i in items} | set(state.details))
    )
    added_before = set(planned)
    planned = static_plan.add_queues(planned, total, home, next_ids)
    epoch = new_epoch(state.epoch)
    details = static_plan.details_for(state.topic, total, epoch, planned, state.details)
    leaders = sorted(
        {planned[q][-1].bname for q in moves} | {planned[q][-1].bname for q in set(planned) - added_before}
    )
    handed: dict[str, list[list[Any]]] = {}
    for q, rows in sequences.items():  # relabelled to the physical queue the new leader writes
        leader = planned[q][-1]
        handed.setdefault(leader.bname, []).extend([*row[:2], leader.queue_id, *row[3:]] for row in rows)
    _write(core, state, details, leaders, handed)
    _carry_progress(core, state, current, planned, list(moves))
    return RemapResult(
        state.topic,
        epoch,
        total,
        moved=[(q, current[q][-1].bname, b, planned[q][-1].logic_offset) for q, b in sorted(moves.items())],
        added=[(q, planned[q][-1].bname) for q in sorted(set(planned) - added_before)],
    )


def _carry_progress(
    core: QueueCore, state: _State, current: static_plan.Queues, planned: static_plan.Queues, moved: list[int]
) -> None:
    """Copy every group's progress on the moved queues from their old leaders to the new ones,
    so that a queue's leader holds its groups' progress (the lag metrics read it there; readers
    would find it on the old leader too). Never over progress a group already committed at the
    new leader. Best effort: the remap is done either way."""
    logical_topic = LOGICAL_PREFIX + state.topic

    def table(broker: str) -> dict[str, Any]:
        request = RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET)
        found: dict[str, Any] = unpack(core.call(state.brokers[broker], request).body)["offsets"]
        return found

    try:
        tables: dict[str, dict[str, Any]] = {}
        for q in moved:
            old, new = current[q][-1].bname, planned[q][-1].bname
            for broker in (old, new):
                if broker not in tables:
                    tables[broker] = table(broker)
            for key, queues in tables[old].items():
                there = tables[new].get(key, {})
                topic, group = split_progress_key(str(key))
                if topic == logical_topic and str(q) in queues and str(q) not in there:
                    core.commit_offset(group, state.topic, q, int(queues[str(q)]))
    except (RocketSparkError, KeyError) as exc:
        log.warning("remap of %s: some groups' progress stays on the old leaders (%s)", state.topic, exc)


def _seal(
    core: QueueCore, state: _State, current: static_plan.Queues, logical_ids: list[int]
) -> tuple[dict[int, int], dict[int, list[list[Any]]]]:
    """Seal the queues' open segments: each one's end, and its idempotent producers' rows."""
    by_broker: dict[str, list[int]] = {}
    for q in logical_ids:
        by_broker.setdefault(current[q][-1].bname, []).append(q)
    ends: dict[int, int] = {}
    sequences: dict[int, list[list[Any]]] = {}
    for broker, ids in sorted(by_broker.items()):
        address = state.brokers.get(broker)
        if address is None:
            raise BrokerNotExistError(
                f"broker {broker} leads logical queue(s) {ids} of {state.topic} but is not registered, so it "
                "cannot be fenced; bring it back (or wait for it) before remapping its queues"
            )
        request = RemotingCommand.request(RequestCode.SEAL_LOGIC_QUEUES, {"topic": state.topic, "logicQueueIds": ids})
        sealed = unpack(core.call(address, request).body)
        ends.update({int(k): int(v) for k, v in sealed["ends"].items()})
        sequences.update({int(k): list(v) for k, v in sealed.get("producers", {}).items()})
    return ends, sequences


def drain_broker(core: QueueCore, broker: str, topics: list[str] | None) -> list[RemapResult]:
    """Move every logical queue ``broker`` leads to the other brokers, evenly."""
    brokers = core.brokers()
    if broker not in brokers:
        raise BrokerNotExistError(f"unknown broker {broker}; registered brokers: {', '.join(sorted(brokers))}")
    if topics is None:
        response = core.call(brokers[broker], RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
        topics = sorted(c["name"] for c in unpack(response.body))
    results = []
    for topic in topics:
        here = broker_topic_config(core, brokers[broker], topic)
        if here is None or not here.get("mapping"):
            continue  # not a static topic on this broker: it leads none of its queues
        state = read_state(core, topic, brokers)
        if not state.exists:
            continue
        current = state.queues()
        led = [q for q, items in current.items() if items and items[-1].bname == broker and not items[-1].sealed]
        if not led:
            continue
        targets = [b for b in sorted(state.brokers) if b != broker]
        if not targets:
            raise BrokerNotExistError(f"cannot drain {broker}: it is the only broker left for {topic}")
        moves = static_plan.spread_moves(current, led, targets)
        results.append(_apply(core, state, current, moves, state.total, None))
    return results


class StaticTopics:
    """Static topics: their logical queues keep their ids and offsets wherever they move."""

    def __init__(self, core: QueueCore) -> None:
        self.core = core

    def create(self, topic: str, queues: int = DEFAULT_QUEUES, *, brokers: list[str] | None = None) -> RemapResult:
        """Create a static topic of ``queues`` logical queues, spread evenly over ``brokers``
        (default: every registered broker)."""
        return create_static_topic(self.core, topic, queues, brokers)

    def remap(
        self,
        topic: str,
        queues: list[int] | None = None,
        to_broker: str | None = None,
        *,
        total_queues: int | None = None,
    ) -> RemapResult:
        """Move logical ``queues`` to ``to_broker`` without copying data, and/or raise the
        queue count to ``total_queues`` (new queues go to ``to_broker``, else spread evenly)."""
        return remap_static_topic(self.core, topic, queues, to_broker, total_queues)

    def drain_broker(
        self, broker_name: str, *, topics: list[str] | None = None, wipe_write_perm: bool = True
    ) -> list[RemapResult]:
        """Move every logical queue the broker leads to the other brokers; by default also wipe
        its write permission so normal topics stop writing to it. Its data stays readable."""
        results = drain_broker(self.core, broker_name, topics)
        if wipe_write_perm:
            Servers(self.core).wipe_write_perm(broker_name)
        return results
