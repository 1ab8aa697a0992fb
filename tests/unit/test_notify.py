"""The nameserver's route notifier: who hears of what, when it holds back, what it keeps."""

from __future__ import annotations

from nameserver.notify import RouteNotifier
from rocketspark.protocol.codes import ResponseCode
from rocketspark.protocol.command import RemotingCommand


class FakeStreams:
    """Push streams by client id (PushStreams): open ones take pushes unless stalled."""

    def __init__(self, *open_ids: str) -> None:
        self.open = set(open_ids)
        self.stalled: set[str] = set()
        self.sent: list[tuple[str, list[str]]] = []

    def is_open(self, client_id: str) -> bool:
        return client_id in self.open

    def send(self, client_id: str, command: RemotingCommand) -> bool:
        if client_id not in self.open or client_id in self.stalled:
            return False
        self.sent.append((client_id, command.ext["topics"]))
        return True

    def close(self, client_id: str, notifier: RouteNotifier) -> None:
        """The stream ends, and its owner tells the notifier (as the nameserver's PushHub does)."""
        self.open.discard(client_id)
        notifier.stream_closed(client_id)


def notifier(streams: FakeStreams, *, load: float = 1000.0, memory: float = 1.0, cap: int = 100) -> RouteNotifier:
    return RouteNotifier(streams, max_load_per_cpu=load, max_memory_used=memory, max_per_client=cap)


def test_only_subscribers_of_a_changed_topic_are_pushed() -> None:
    streams = FakeStreams("c1", "c2")
    n = notifier(streams)
    n.subscribe("c1", ["a", "b"])
    n.subscribe("c2", ["b"])
    n.mark(["a"])
    assert n.scan() == 1 and streams.sent == [("c1", ["a"])] and n.changed == set()
    n.mark(["z"])
    assert n.scan() == 0  # nobody subscribed to z
    streams.stalled.add("c2")
    n.mark(["b"])
    assert n.scan() == 1 and n.counters.dropped == 1  # c2's stream is full: dropped, counted


def test_resource_pressure_pauses_pushes_and_keeps_the_changes() -> None:
    n = notifier(FakeStreams("c1"), load=-1.0)
    n.subscribe("c1", ["a"])
    n.mark(["a"])
    assert n.scan() == 0 and n.scan() == 0
    assert n.counters.degraded_rounds == 2 and n.changed == {"a"}


def test_a_closed_stream_forgets_its_subscriptions() -> None:
    streams = FakeStreams("c1", "c2")
    n = notifier(streams)
    n.subscribe("c1", ["a", "b"])
    n.subscribe("c2", ["a"])
    assert n.subscription_count == 3
    streams.close("c1", n)
    assert n.subscription_count == 1 and n.subscribers == {"a": {"c2"}} and n.by_client == {"c2": {"a"}}
    n.unsubscribe("c2", ["a"])
    assert n.subscribers == {} and n.by_client == {}


def test_a_subscription_without_an_open_stream_is_refused_and_kept_nowhere() -> None:
    streams = FakeStreams("c1")
    n = notifier(streams)
    outcome = n.subscribe("nobody", ["a", "b"])
    assert not outcome.stream_open and n.subscription_count == 0 and n.counters.without_stream == 2
    refusal = outcome.error()
    assert refusal is not None and refusal.code == ResponseCode.SUBSCRIPTION_REFUSED
    assert refusal.details == {"streamOpen": False, "refused": ["a", "b"]}
    assert 'client "nobody" has no open push stream' in refusal.message
    assert "none of its 2 topic(s) was kept" in refusal.message and "Open the push stream first" in refusal.message
    streams.close("c1", n)
    late = n.subscribe("c1", ["a"])  # arrives after its stream closed
    assert not late.stream_open and n.subscription_count == 0 and n.subscribers == {}
    assert late.error() is not None


def test_a_client_at_its_cap_is_refused_the_rest_and_counted() -> None:
    n = notifier(FakeStreams("c1", "c2"), cap=2)
    first = n.subscribe("c1", ["a", "b", "c", "d"])
    assert first.stream_open and first.refused == ["c", "d"] and n.counters.refused == 2
    refusal = first.error()
    assert refusal is not None and refusal.details == {"streamOpen": True, "refused": ["c", "d"]}
    assert 'client "c1" is at its cap of 2 route subscriptions' in refusal.message
    assert "2 of its 4 topic(s) were not kept" in refusal.message and "and 2 were" in refusal.message
    assert "max_subscriptions_per_client" in refusal.message
    again = n.subscribe("c1", ["a", "b"])  # already held: no new room needed
    assert again.refused == [] and again.error() is None
    assert n.subscribe("c2", ["c"]).refused == []  # the cap is per client
    n.unsubscribe("c1", ["a"])
    assert n.subscribe("c1", ["c"]).refused == [] and n.by_client["c1"] == {"b", "c"}
    assert n.subscription_count == 3 and n.counters.refused == 2


def test_a_cap_of_zero_refuses_every_topic_of_an_open_stream() -> None:
    n = notifier(FakeStreams("c1"), cap=0)
    outcome = n.subscribe("c1", ["a", "a", "b"])  # a topic named twice is asked once
    refusal = outcome.error()
    assert outcome.refused == ["a", "b"] and refusal is not None and "2 of its 2 topic(s)" in refusal.message
    assert n.subscription_count == 0 and n.by_client == {}


def test_suppressed_changes_are_counted() -> None:
    n = notifier(FakeStreams())
    n.suppress({"a", "b", "c"})
    assert n.counters.suppressed == 3
