"""A batch's survey (rocketspark.codec.survey): the facts ``send_batch`` reads once, and the
encoding that reuses them giving the same records as the encoding that looks for itself."""

from __future__ import annotations

import pytest

from rocketspark.client.send_wire import stamp_sharding_keys
from rocketspark.codec import ids
from rocketspark.codec.build import PER_MESSAGE_BYTES, chunk_messages, encode_sent, record_overhead
from rocketspark.codec.columns import decode
from rocketspark.codec.messages import to_messages
from rocketspark.codec.survey import Survey, survey
from rocketspark.protocol.properties import SHARDING_KEY
from rocketspark.protocol.types import Message

TOPIC = "orders"


def plain(*bodies: bytes) -> list[Message]:
    return [Message(TOPIC, body) for body in bodies]


def test_a_plain_batch_to_one_place_is_surveyed_with_its_sizes() -> None:
    assert survey(plain(b"ab", b"", b"abcde")) == Survey(same_route=True, plain=True, body_bytes=7, largest=5)
    assert survey(plain(b"")) == Survey(same_route=True, plain=True, body_bytes=0, largest=0)


@pytest.mark.parametrize(
    "odd",
    [
        Message("other", b"x"),
        Message(TOPIC, b"x", queue_id=0),
        Message(TOPIC, b"x", sharding_key="k"),
    ],
    ids=["another topic", "a fixed queue", "a sharding key"],
)
def test_one_message_going_elsewhere_anywhere_in_the_batch_splits_the_route(odd: Message) -> None:
    for place in (0, 1, 3):
        messages = plain(b"a", b"b", b"c")
        messages.insert(place, odd)
        assert survey(messages).same_route is False


def test_a_batch_pinned_alike_goes_to_one_place() -> None:
    messages = [Message(TOPIC, b"x", queue_id=2, sharding_key="k") for _ in range(3)]
    assert survey(messages).same_route is True


@pytest.mark.parametrize(
    "extra",
    [
        {"tags": ""},  # an empty tag is a tag
        {"tags": "A"},
        {"keys": ["k"]},
        {"properties": {"p": "v"}},
        {"sharding_key": "k"},  # sent as a property
    ],
    ids=["empty tag", "tag", "keys", "properties", "sharding key"],
)
def test_any_message_with_more_than_a_body_makes_the_batch_not_plain(extra: dict[str, object]) -> None:
    for place in (0, 2):
        messages = plain(b"a", b"b")
        messages.insert(place, Message(TOPIC, b"c", **extra))  # type: ignore[arg-type]
        assert survey(messages).plain is False


@pytest.mark.parametrize(
    "messages",
    [
        plain(b"x" * 10, b"y" * 30, b""),
        [Message(TOPIC, b"x" * 10, tags="t"), *plain(b"y" * 20)],
        [Message(TOPIC, b"k", keys="key", properties={"p": "v" * 50}), *plain(b"z" * 40, b"w")],
    ],
    ids=["plain", "tagged", "keys and properties"],
)
def test_chunks_are_the_same_with_the_survey_as_without(messages: list[Message]) -> None:
    exact = record_overhead(TOPIC.encode()) + sum(len(m.body) + PER_MESSAGE_BYTES for m in messages)
    for limit in (exact + 100, exact, exact - 1, 80, 1):
        assert chunk_messages(messages, limit, survey(messages)) == chunk_messages(messages, limit)


@pytest.mark.parametrize(
    "messages",
    [
        plain(b"x" * 10, b"y"),
        [Message(TOPIC, b"t", tags=""), *plain(b"y")],
        [Message(TOPIC, b"k", keys=["a"], properties={"p": "v"}), *plain(b"z")],
    ],
    ids=["plain", "empty tag", "keys and properties"],
)
def test_a_record_is_the_same_whether_its_plainness_is_told_or_looked_for(messages: list[Message]) -> None:
    first_id = ids.mint(len(messages))
    told = encode_sent(TOPIC, messages, born_ms=1, first_id=first_id, plain=survey(messages).plain)
    assert told == encode_sent(TOPIC, messages, born_ms=1, first_id=first_id)


def test_a_keyed_batch_keeps_its_sharding_key_property_as_send_batch_encodes_it() -> None:
    """``send_batch`` surveys before it stamps the key as a property: the survey must already
    count the key, or the record would be encoded as bodies alone and lose the property."""
    messages = [Message(TOPIC, b"x", sharding_key="order-7") for _ in range(3)]
    seen = survey(messages)
    stamp_sharding_keys(messages)
    record, _ = encode_sent(TOPIC, messages, plain=seen.plain)
    got = to_messages(decode(record), TOPIC, "broker-a", ids.store_host("10.0.0.7:10911"))
    assert [m.properties.get(SHARDING_KEY) for m in got] == ["order-7"] * 3
