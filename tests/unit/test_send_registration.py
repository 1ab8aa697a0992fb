"""A send that auto-creates a topic is answered only once the nameservers know the topic."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.handlers.send import handle_send
from rocketspark.codec.build import encode_messages
from rocketspark.protocol.codes import RequestCode, ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import Message
from rocketspark.protocol.validation import AUTO_CREATE_TOPIC
from tests.helpers import Registrations


@pytest.fixture
def nameserver() -> Registrations:
    return Registrations(delay_s=0.1)  # a nameserver round trip


@pytest.fixture
def broker(tmp_path: Path, nameserver: Registrations) -> Iterator[Broker]:
    config = BrokerConfig(
        data_dir=str(tmp_path / "broker"), auto_create_topic_enable=True, nameservers=["127.0.0.1:9876"]
    )
    b = Broker(config, nameserver_transport=nameserver)
    b.open()
    yield b
    b.close()


def test_the_first_send_to_a_new_topic_is_answered_after_its_registration(
    broker: Broker, nameserver: Registrations
) -> None:
    registered = nameserver.changed
    ext = {"topic": "fresh", "defaultTopic": AUTO_CREATE_TOPIC, "defaultTopicQueueNums": 4}
    body = encode_messages("fresh", [Message("fresh", b"first")])

    async def send() -> tuple[RemotingCommand, list[list[str] | None]]:
        response = await handle_send(broker.send_context, RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, body))
        return response, list(registered)  # what the nameservers had been told when the answer left

    response, registered_by_then = asyncio.run(send())
    assert response.code == ResponseCode.SUCCESS
    # The producer looks the route up on its next send: without it, that send would go through
    # the template again and could create the topic on another broker as well.
    assert registered_by_then == [["fresh"]]
    again, _ = asyncio.run(send())  # the topic exists now: no second registration
    assert again.code == ResponseCode.SUCCESS and registered == [["fresh"]]
