"""Offset ids in RocketMQ's layout (MessageDecoder.createMessageId), round trip and refusals."""

from __future__ import annotations

import os
import threading

import pytest

from rocketspark.codec import ids
from rocketspark.errors import InvalidParameterError


def test_offset_id_is_rocketmqs_layout() -> None:
    text = ids.offset_msg_id(ids.host_bytes("10.0.0.1"), 10911, 5000, 3)
    # ip 0A000001, port 00002A9F, physical offset 5000 + 3
    assert text == "0A000001" + "00002A9F" + f"{5003:016X}"
    parsed = ids.parse_offset_msg_id(text.lower())
    assert parsed == ids.OffsetMsgId("10.0.0.1", 10911, 5003)
    assert parsed.address == "10.0.0.1:10911"


def test_ipv6_offset_id() -> None:
    text = ids.offset_msg_id(ids.host_bytes("::1"), 9876, 1 << 40, 7)
    assert len(text) == ids.V6_HEX
    parsed = ids.parse_offset_msg_id(text)
    assert (parsed.address, parsed.physical) == ("[::1]:9876", (1 << 40) + 7)


@pytest.mark.parametrize("text", ["", "XYZ", "0A000001" * 3, "0A000001" + "00000000" + "0" * 16])
def test_not_an_offset_id(text: str) -> None:
    with pytest.raises(InvalidParameterError, match="not an offset message id"):
        ids.parse_offset_msg_id(text)


def test_a_physical_offset_lies_in_its_batchs_bytes() -> None:
    physical = ids.physical_offset(1000, 9)
    assert ids.covers(1000, 10, physical) and not ids.covers(1000, 9, physical)
    assert not ids.covers(1010, 50, physical)


# -- client ids -----------------------------------------------------------------------------

JAN_5 = 1_767_571_200.0  # 2026-01-05T00:00:00Z, 4 days into its month


def minter_at(now: list[float]) -> ids.IdMinter:
    return ids.IdMinter(bytes([10, 1, 2, 3]), pid=0x12345, instance=0xCAFEBABE, clock=lambda: now[0])


def test_a_client_id_is_rocketmq_javas_layout() -> None:
    now = [JAN_5 + 0.25]
    first = minter_at(now).next()
    text = ids.client_id_hex(first)
    # ip, pid (low 16 bits), instance, ms since the month began, counter
    assert text == "0A010203" + "2345" + "CAFEBABE" + f"{4 * 86_400_000 + 250:08X}" + "0000"
    assert len(text) == ids.CLIENT_ID_HEX and ids.parse_client_id(text.lower()) == first


def test_a_batchs_ids_are_consecutive_and_the_next_range_follows_it() -> None:
    now = [JAN_5]
    minter = minter_at(now)
    first = minter.next(70_000)  # more than the 16-bit counter holds: it carries into the time
    assert ids.client_id_at(first, 65_536) == f"{int.from_bytes(first, 'big') + 65_536:032X}"
    assert ids.client_id_at(first, 65_536)[-12:] == f"{(4 * 86_400_000 + 1) << 16:012X}"
    second = minter.next(1)
    assert int.from_bytes(second, "big") == int.from_bytes(first, "big") + 70_000  # the clock did not move on
    now[0] += 1  # a second later: the time field jumps ahead of the counter
    third = minter.next(1)
    assert ids.client_id_hex(third)[20:28] == f"{4 * 86_400_000 + 1000:08X}"
    assert ids.client_id_hex(third)[-4:] == "0000"


def test_the_time_field_counts_from_each_months_start() -> None:
    now = [1_769_903_999.5]  # 2026-01-31T23:59:59.5Z
    minter = minter_at(now)
    late = ids.client_id_hex(minter.next())
    now[0] = 1_769_904_000.0  # 2026-02-01T00:00:00Z
    early = ids.client_id_hex(minter.next())
    assert late[20:28] == f"{30 * 86_400_000 + 86_399_500:08X}" and early[20:28] == "00000000"


def test_minting_from_many_threads_gives_every_message_its_own_id() -> None:
    minter = ids.IdMinter(bytes([127, 0, 0, 1]))
    firsts: list[bytes] = []

    def work() -> None:
        for _ in range(500):
            firsts.append(minter.next(10))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = {int.from_bytes(f, "big") + i for f in firsts for i in range(10)}
    assert len(every) == 8 * 500 * 10


def test_client_id_at_carries_through_every_field() -> None:
    first = bytes.fromhex("0A0102032345CAFEBABEFFFFFFFFFFFE")
    assert ids.client_id_at(first, 3) == "0A010203" + "2345" + "CAFEBABF" + "00000000" + "0001"
    assert ids.client_id_at(bytes.fromhex("F" * 32), 1) == "0" * 32  # 128 bits, as the Arrow column has it


@pytest.mark.parametrize("text", ["", "0A01", "0A010203" * 4 + "00", "Z" * 32, "01" + "A" * 32])
def test_strings_that_are_not_our_client_ids_are_left_to_be_found_as_strings(text: str) -> None:
    assert ids.parse_client_id(text) is None


def test_a_forked_child_mints_under_its_own_pid() -> None:
    parent = ids.mint()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its id and leave at once
        os.write(write, ids.mint())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 16)
    os.close(read)
    os.close(write)
    assert child[4:6] == (pid & 0xFFFF).to_bytes(2, "big") and parent[4:6] == (os.getpid() & 0xFFFF).to_bytes(2, "big")


def test_a_store_host_is_the_packed_address_and_port() -> None:
    assert ids.store_host("10.0.0.1:10911") == bytes([10, 0, 0, 1]) + (10911).to_bytes(4, "big")
    assert ids.store_host("[::1]:9876") == bytes(15) + b"\x01" + (9876).to_bytes(4, "big")
    assert ids.store_host("localhost:80")[4:] == (80).to_bytes(4, "big")  # a name is resolved
    assert ids.store_host("no-such-host.invalid:1") == bytes(4) + (1).to_bytes(4, "big")


def test_batch_ids_give_a_messages_two_ids() -> None:
    first = bytes.fromhex("0A0102032345CAFEBABE000000010000")
    batch = ids.BatchIds(first, ids.store_host("10.0.0.1:10911"))
    assert batch.client_id(2) == "0A0102032345CAFEBABE000000010002"
    assert batch.offset_msg_id(5000, 2) == ids.offset_msg_id(ids.host_bytes("10.0.0.1"), 10911, 5000, 2)
    assert ids.BatchIds(None, batch.host).client_id(2) is None
