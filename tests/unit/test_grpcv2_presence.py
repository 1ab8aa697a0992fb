"""Which clients are still there: a Telemetry stream's end, a re-opened stream, calls, termination."""

from __future__ import annotations

from rocketspark.grpcv2.presence import Presence


def test_a_client_whose_stream_ends_and_that_stays_silent_is_gone_after_the_grace() -> None:
    presence = Presence(grace_s=2.0, alive_s=30.0)
    presence.opened("c", now=0.0)
    presence.heard_from("c", now=5.0)
    presence.closed("c", now=10.0)
    assert presence.departed(now=11.9) == []
    assert presence.departed(now=12.0) == ["c"]
    assert presence.departed(now=13.0) == []  # given once
    assert len(presence) == 0


def test_a_stream_re_opened_within_the_grace_keeps_the_client() -> None:
    presence = Presence(grace_s=2.0, alive_s=30.0)
    presence.opened("c", now=0.0)
    presence.opened("c", now=9.0)  # the new stream first, as the Python client rebuilds it
    presence.closed("c", now=9.5)
    assert presence.departed(now=100.0) == []
    presence.closed("c", now=100.0)
    presence.opened("c", now=101.0)  # the Java client: the old one broke, a new one a second later
    assert presence.departed(now=200.0) == []


def test_a_client_that_calls_on_without_a_stream_is_gone_only_once_it_is_quiet() -> None:
    presence = Presence(grace_s=2.0, alive_s=30.0)
    presence.opened("c", now=0.0)
    presence.closed("c", now=10.0)
    presence.heard_from("c", now=11.0)  # a heartbeat: alive, its stream broke
    assert presence.departed(now=40.9) == []
    assert presence.alive("c", now=40.9)
    assert presence.departed(now=41.0) == ["c"]


def test_a_client_that_never_had_a_stream_is_never_taken_for_gone_and_is_forgotten_when_quiet() -> None:
    presence = Presence(grace_s=2.0, alive_s=30.0)
    presence.heard_from("raw", now=0.0)
    assert presence.alive("raw", now=29.0) and not presence.alive("raw", now=30.0)
    assert presence.departed(now=1000.0) == []
    assert len(presence) == 0


def test_a_terminated_client_is_ended_for_a_while_and_its_streams_end_quietly() -> None:
    presence = Presence(grace_s=2.0, alive_s=30.0)
    presence.opened("c", now=0.0)
    presence.terminated("c", now=1.0)  # NotifyClientTermination: the endpoint released it already
    presence.closed("c", now=1.5)
    assert presence.ended("c") and presence.departed(now=30.9) == [] and presence.ended("c")
    assert presence.departed(now=31.0) == [] and not presence.ended("c")  # tombstones do not pile up
    presence.terminated("d", now=40.0)
    presence.opened("d", now=41.0)  # it opened a stream again: it is back
    assert not presence.ended("d")
    presence.closed("d", now=42.0)
    assert presence.departed(now=44.0) == ["d"]
    presence.opened("", now=0.0)  # calls without a client id are not watched
    presence.closed("", now=0.0)
    assert len(presence) == 0
