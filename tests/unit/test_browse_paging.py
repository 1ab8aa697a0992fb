"""The pure parts of browsing and resending: where a page's chunk starts in a static queue with a
gap, the cursor's round trip and its refusals, and the copy a resend sends."""

from __future__ import annotations

import pytest

from rocketspark.client.browse import Remaining, back_from, decode_cursor, encode_cursor
from rocketspark.client.logical import LogicalQueue, Segment
from rocketspark.client.retry_admin import resend_copy
from rocketspark.errors import InvalidParameterError
from rocketspark.protocol.static_mapping import LogicQueueMappingItem
from rocketspark.protocol.types import MessageExt


def remapped_queue() -> LogicalQueue:
    """Logical queue 0: offsets 0-29 on broker-a (sealed), then from 10030 on broker-b."""
    old = LogicQueueMappingItem(gen=0, queue_id=0, bname="broker-a", logic_offset=0, end_offset=30)
    new = LogicQueueMappingItem(gen=1, queue_id=0, bname="broker-b", logic_offset=10_030)
    return LogicalQueue("events", 0, (Segment(old, "a:1"), Segment(new, "b:1")), 1, True)


def test_a_chunk_read_backwards_skips_the_gap_between_segments() -> None:
    queue = remapped_queue()
    assert back_from(queue, 0, 10_040, 5) == 10_035
    assert back_from(queue, 0, 10_040, 10) == 10_030
    assert back_from(queue, 0, 10_040, 15) == 25  # 10 on broker-b, then 5 from the old segment's end
    assert back_from(queue, 0, 10_040, 100) == 0
    assert back_from(queue, 27, 10_040, 15) == 27  # never below the range's low end
    assert back_from(queue, 0, 10_030, 3) == 27  # a top inside the gap: the old segment's last 3


def test_a_cursor_reads_back_as_it_was_written_and_refuses_what_it_was_not_made_for() -> None:
    where = Remaining("orders", 1000, None, {0: (0, 12), 3: (5, 7)})
    cursor = encode_cursor(where)
    assert "=" not in cursor and decode_cursor(cursor, "orders", None, None, 4) == where
    assert decode_cursor(cursor, "orders", 1000, None, 4) == where
    refusals = {
        "is malformed": ("not base64!", "orders", None, None, 4),
        'made for topic "orders", not "other"': (cursor, "other", None, None, 4),
        "made for start 1000, not 999": (cursor, "orders", 999, None, 4),
        "made for end None, not 5000": (cursor, "orders", None, 5000, 4),
        "names queues the topic no longer has": (cursor, "orders", None, None, 3),
    }
    for why, args in refusals.items():
        with pytest.raises(InvalidParameterError, match=why) as refused:
            decode_cursor(*args)
        assert "start again without a cursor" in refused.value.message


def test_a_resent_dead_letter_goes_to_the_retry_topic_under_its_first_topic_due_now() -> None:
    properties = {
        "UNIQ_KEY": "C0A80001000000000000000000000001",
        "RETRY_TOPIC": "orders",
        "ORIGIN_MESSAGE_ID": "C0A80001000000000000000000000000",
        "RECONSUME_TIME": "17",
        "RETRY_DUE_AT_MS": "1764000000000",
        "region": "eu",
    }
    letter = MessageExt("%DLQ%billing", 0, 4, b"order 1", "created", ["o-1"], properties, 1, 2, 3, "broker-a")
    copy = resend_copy(letter, "billing")
    assert (copy.topic, copy.body, copy.tags, copy.keys) == ("%RETRY%billing", b"order 1", "created", ["o-1"])
    assert copy.properties == {
        "RETRY_TOPIC": "orders",
        "ORIGIN_MESSAGE_ID": "C0A80001000000000000000000000000",
        "RECONSUME_TIME": "0",
        "region": "eu",
    }
    plain = MessageExt("orders", 1, 0, b"x", None, None, {"UNIQ_KEY": "C0A8000100000000000000000000000A"}, 1, 2, 3, "b")
    assert resend_copy(plain, "audit").properties == {
        "RETRY_TOPIC": "orders",
        "ORIGIN_MESSAGE_ID": "C0A8000100000000000000000000000A",
        "RECONSUME_TIME": "0",
    }
