"""The read path without Spark: planning a queue's ranges into partitions, and how reading a
partition reacts to what a broker answers (a scripted remoting client, a broker that never
answers)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from rocketspark.client.logical import LogicalQueue, Segment, plan_ranges
from rocketspark.codec.build import encode_messages, stamped_head
from rocketspark.codec.layout import BODY_AT
from rocketspark.errors import DataCorruptedError, DataLossError, RequestTimeoutError
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.static_mapping import LogicQueueMappingItem
from rocketspark.protocol.types import Message
from rocketspark.remoting.listener import create_server
from rocketspark.remoting.server import Dispatcher
from rocketspark.spark.connection import Connection
from rocketspark.spark.planning import split
from rocketspark.spark.reading import ReadSpec, read_range
from tests.helpers import batch_record

NS = "127.0.0.1:9876"


# -- planning -------------------------------------------------------------------------------------


def two_segment_queue() -> LogicalQueue:
    """Logical queue 0: offsets [0, 100) on broker-a, then [1000, ...) on broker-b (a remap)."""
    old = LogicQueueMappingItem(gen=0, queue_id=0, bname="broker-a", logic_offset=0, end_offset=100)
    new = LogicQueueMappingItem(gen=1, queue_id=3, bname="broker-b", logic_offset=1000)
    return LogicalQueue("t", 0, (Segment(old, "127.0.0.1:1"), Segment(new, "127.0.0.1:2")), 1, True)


def test_split_cuts_at_segment_boundaries_before_halving_and_never_spans_two_segments() -> None:
    ranges = plan_ranges(two_segment_queue(), 0, 1300)
    assert [(r.segment.broker_name, r.start, r.end) for r in split(ranges, 2)] == [
        ("broker-a", 0, 100),
        ("broker-b", 0, 300),
    ]
    four = split(ranges, 4)
    assert [(r.segment.broker_name, r.logical_start, r.logical_end) for r in four] == [
        ("broker-a", 0, 100),
        ("broker-b", 1000, 1075),
        ("broker-b", 1075, 1150),
        ("broker-b", 1150, 1300),
    ]


# -- reading a partition --------------------------------------------------------------------------


class Scripted:
    """A remoting client that answers every pull with the next scripted response."""

    def __init__(self, *responses: RemotingCommand) -> None:
        self.responses = list(responses)
        self.requests: list[RemotingCommand] = []

    def invoke(self, address: str, request: RemotingCommand, timeout_ms: int | None = None) -> RemotingCommand:
        self.requests.append(request)
        return self.responses.pop(0) if self.responses else RemotingCommand(ResponseCode.SYSTEM_ERROR)

    def invoke_async(
        self, address: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> concurrent.futures.Future[RemotingCommand]:
        future: concurrent.futures.Future[RemotingCommand] = concurrent.futures.Future()
        future.set_result(self.invoke(address, request, timeout_ms))
        return future


def spec(**changes: Any) -> ReadSpec:
    values: dict[str, Any] = {
        "nameservers": (NS,),
        "tags": None,
        "include_properties": False,
        "fail_on_data_loss": True,
        "verify_crc": True,
        "pull_timeout_ms": 1000,
        "pull_batch_size": 100,
        "connection": Connection(),
    }
    return ReadSpec(**{**values, **changes})


def stored(offsets: range, tag: str | None = None) -> bytes:
    """Batches of one, as a broker stores and answers them."""
    parts = []
    for o in offsets:
        sent = batch_record("t", [f"m{o}".encode()], tag)
        parts.append(stamped_head(sent, 0, o, 1000 + 200 * o, 2) + sent[BODY_AT:])
    return b"".join(parts)


def answer(code: int, nxt: int, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code, ext={"next": nxt, "min": 0, "max": 100}, body=body)


def one_segment(end: int) -> Any:
    item = LogicQueueMappingItem(gen=0, queue_id=0, bname="broker-a", logic_offset=0)
    queue = LogicalQueue("t", 0, (Segment(item, "127.0.0.1:1"),), 0, False)
    return plan_ranges(queue, 0, end)[0]


def test_an_answer_that_does_not_move_on_is_data_loss_not_a_silent_end() -> None:
    def scripted() -> Scripted:
        return Scripted(
            answer(ResponseCode.SUCCESS, 5, stored(range(5))), answer(ResponseCode.PULL_RETRY_IMMEDIATELY, 5)
        )

    got = []
    with pytest.raises(DataLossError, match=r"offsets \[5, 10\) \(5 messages\) are no longer on broker broker-a"):
        for batch in read_range(spec(pull_batch_size=5), one_segment(10), scripted()):
            got.append(batch.num_rows)
    assert got == []  # the rows decoded so far wait for more (MIN_ARROW_ROWS); the task fails with them
    lenient = spec(pull_batch_size=5, fail_on_data_loss=False)
    assert [b.num_rows for b in read_range(lenient, one_segment(10), scripted())] == [5]


def test_verify_crc_decides_whether_a_damaged_record_fails_the_read() -> None:
    damaged = bytearray(stored(range(3)))
    damaged[-1] ^= 0xFF  # the last body byte of the last record
    with pytest.raises(DataCorruptedError, match="CRC mismatch"):
        list(
            read_range(spec(verify_crc=True), one_segment(3), Scripted(answer(ResponseCode.SUCCESS, 3, bytes(damaged))))
        )
    unchecked = read_range(
        spec(verify_crc=False), one_segment(3), Scripted(answer(ResponseCode.SUCCESS, 3, bytes(damaged)))
    )
    assert sum(b.num_rows for b in unchecked) == 3


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """A server that takes pull requests and never answers them."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    dispatcher = Dispatcher("silent-broker")

    async def never(request: RemotingCommand) -> RemotingCommand:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    dispatcher.register(RequestCode.PULL_MESSAGE, never)

    async def start() -> tuple[Any, int]:
        server, port = create_server(dispatcher, "127.0.0.1", 0)
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    yield f"127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(server.stop(0), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def test_pull_timeout_ms_is_the_deadline_of_each_pull(silent_broker: str) -> None:
    item = LogicQueueMappingItem(gen=0, queue_id=0, bname="broker-a", logic_offset=0)
    queue = LogicalQueue("t", 0, (Segment(item, silent_broker),), 0, False)
    with pytest.raises(RequestTimeoutError, match=rf"broker at {silent_broker} did not answer .* within 0.4 s"):
        list(read_range(spec(pull_timeout_ms=400), plan_ranges(queue, 0, 10)[0]))


def test_pull_requests_name_the_segment_and_ask_for_at_most_pull_batch_size() -> None:
    scripted = Scripted(
        *(answer(ResponseCode.SUCCESS, min(o + 4, 10), stored(range(o, min(o + 4, 10)))) for o in (0, 4, 8))
    )
    assert [b.num_rows for b in read_range(spec(pull_batch_size=4), one_segment(10), scripted)] == [10]  # together
    assert [(r.ext["queueOffset"], r.ext["maxMsgNums"], r.ext["endOffset"]) for r in scripted.requests] == [
        (0, 4, 10),
        (4, 4, 10),
        (8, 2, 10),
    ]


def test_an_sql_option_goes_with_each_pull_and_only_the_selected_rows_come_back() -> None:
    parts = []
    for o in range(6):  # amounts 0, 50, 100, ...: the broker answered every record; some hold no match
        sent = encode_messages("t", [Message("t", f"m{o}".encode(), properties={"amount": str(50 * o)})])
        parts.append(stamped_head(sent, 0, o, 1000 + 200 * o, 2) + sent[BODY_AT:])
    scripted = Scripted(answer(ResponseCode.SUCCESS, 6, b"".join(parts)))
    batches = list(read_range(spec(sql="amount > 100"), one_segment(6), scripted))
    assert [bytes(b) for batch in batches for b in batch.column("body").to_pylist()] == [b"m3", b"m4", b"m5"]
    assert [r.ext["sql"] for r in scripted.requests] == ["amount > 100"]


def test_the_consumers_arrow_schema_is_the_spark_sources_own() -> None:
    """``codec.arrow.SCHEMA`` (no pyspark needed) and the source's schema as Spark converts it
    are written apart; they must not drift."""
    from rocketspark.codec.arrow import SCHEMA
    from rocketspark.spark.arrow import arrow_schema

    assert arrow_schema(True).remove_metadata() == SCHEMA
