"""Large requests in pieces: split on the client, put back together (or dropped) on the server."""

from __future__ import annotations

import pytest

from rocketspark.errors import MessageTooLargeError, SystemBusyError
from rocketspark.protocol.command import MalformedCommand, RemotingCommand
from rocketspark.remoting.admission import MAX_REQUEST_BYTES, SMALL_REQUEST_BYTES, InflightBudget, Ticket
from rocketspark.remoting.framing import PIECE_BYTES, Admitted, Reassembler, messages


class Admitter:
    """The dispatcher's admission, with what it was asked recorded."""

    def __init__(self, limit: int | None) -> None:
        self.budget = InflightBudget(limit, "test server")
        self.heads: list[int] = []

    def __call__(self, head: bytes, size: int) -> Ticket | bytes:
        try:
            return self.budget.admit(size)
        except SystemBusyError:
            command = RemotingCommand.decode_head(head)
            assert command is not None
            self.heads.append(command.opaque)
            return b"busy"


def test_a_small_request_is_one_message_and_a_large_one_comes_back_whole() -> None:
    small = RemotingCommand.request(10, {"topic": "t"}, b"x" * 100).encode()
    large = RemotingCommand.request(10, {"topic": "t"}, bytes(range(256)) * (PIECE_BYTES // 100)).encode()
    assert list(messages(small)) == [small]
    pieces = list(messages(large))
    assert len(pieces) == 3 and all(len(p) <= PIECE_BYTES + 9 for p in pieces)
    admitter = Admitter(None)
    assembler = Reassembler(admitter)
    results = [assembler.feed(p) for p in [*pieces, small]]
    assert results[:2] == [None, None]
    whole, single = results[2], results[3]
    assert isinstance(whole, Admitted) and whole.raw == large and whole.ticket.size == len(large)
    assert isinstance(single, Admitted) and single.raw == small
    assert admitter.budget.inflight_bytes == len(large) + len(small)  # counted from the first piece
    whole.ticket.release()
    whole.ticket.release()  # once, however often called
    assert admitter.budget.inflight_bytes == len(small)


def test_a_refused_large_request_is_answered_at_its_first_piece_and_its_pieces_are_dropped() -> None:
    admitter = Admitter(PIECE_BYTES)
    held = admitter.budget.admit(10)  # something in flight, so a large request does not fit
    large = RemotingCommand.request(10, {}, b"y" * (3 * PIECE_BYTES))
    after = RemotingCommand.request(11, {}, b"z")
    assembler = Reassembler(admitter)
    pieces = list(messages(large.encode()))
    assert assembler.feed(pieces[0]) == b"busy" and admitter.heads == [large.opaque]
    assert [assembler.feed(p) for p in pieces[1:]] == [None] * (len(pieces) - 1)
    next_one = assembler.feed(after.encode())  # the stream carries on after the dropped pieces
    assert isinstance(next_one, Admitted) and RemotingCommand.decode(next_one.raw).code == 11
    assert admitter.budget.refused == 1 and admitter.budget.inflight_bytes == 10 + len(next_one.raw)
    held.release()


def test_a_request_larger_than_the_whole_budget_is_admitted_when_nothing_else_is_in_flight() -> None:
    budget = InflightBudget(100_000, "test server")
    alone = budget.admit(1_000_000)
    with pytest.raises(SystemBusyError, match=r"busy: 1000000 bytes of requests are in flight.*budget of 100000"):
        budget.admit(SMALL_REQUEST_BYTES + 1)
    alone.release()
    assert budget.admit(SMALL_REQUEST_BYTES + 1).size == SMALL_REQUEST_BYTES + 1 and budget.peak_bytes == 1_000_000


def test_small_requests_count_but_are_never_refused_and_none_may_exceed_the_largest() -> None:
    budget = InflightBudget(100, "test server")
    budget.admit(1000)
    assert budget.admit(SMALL_REQUEST_BYTES).size == SMALL_REQUEST_BYTES  # a pull, a heartbeat, an admin call
    assert budget.inflight_bytes == 1000 + SMALL_REQUEST_BYTES and budget.refused == 0
    with pytest.raises(MessageTooLargeError, match="over the largest test server takes"):
        InflightBudget(None, "test server").admit(MAX_REQUEST_BYTES + 1)


def test_a_stream_that_ends_mid_request_gives_its_budget_back() -> None:
    admitter = Admitter(None)
    assembler = Reassembler(admitter)
    first = next(messages(RemotingCommand.request(10, {}, b"w" * (2 * PIECE_BYTES)).encode()))
    assert assembler.feed(first) is None and admitter.budget.inflight_bytes > 0
    assembler.close()
    assert admitter.budget.inflight_bytes == 0


def test_pieces_that_run_past_their_announced_size_break_the_stream() -> None:
    assembler = Reassembler(Admitter(None))
    pieces = list(messages(RemotingCommand.request(10, {}, b"v" * (2 * PIECE_BYTES)).encode()))
    assembler.feed(pieces[0])
    with pytest.raises(MalformedCommand, match="runs past"):
        assembler.feed(pieces[1] + pieces[2] + b"extra")
