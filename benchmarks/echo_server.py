"""A do-nothing gRPC server on rocketspark's method paths: the transport ceiling.

It answers every request with the same tiny success response, reading nothing of the request
but its ``opaque`` (which the multiplexed Channel needs to match the answer), so a benchmark
that sends it the broker's exact batches measures what gRPC plus our client cost, with no
broker work. Prints ``echo ready on <host>:<port>``.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import grpc
import msgpack
from grpc import aio

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))

from rocketspark.protocol import service
from rocketspark.protocol.codes import Flag
from rocketspark.protocol.command import RemotingCommand

REPLY = RemotingCommand(
    0, flag=Flag.RESPONSE, ext={"queueId": 0, "queueOffset": 0, "count": 100, "msgId": "0", "status": "SEND_OK"}
).encode()


EXT = {"queueId": 0, "queueOffset": 0, "count": 100, "msgId": "0", "status": "SEND_OK"}


async def invoke(raw: bytes, context: Any) -> bytes:
    return REPLY


def reply_to(raw: bytes) -> bytes:
    unpacker = msgpack.Unpacker()
    unpacker.feed(raw[:16])  # the header fields come first; the body is never read
    unpacker.read_array_header()
    unpacker.unpack()
    opaque = unpacker.unpack()
    return msgpack.packb([0, opaque, Flag.RESPONSE, "", EXT, b""], use_bin_type=True)


async def channel(requests: Any, context: Any) -> Any:
    async for raw in requests:
        yield reply_to(raw)


async def main() -> None:
    server = aio.server(options=list(service.SERVER_OPTIONS))
    handler = grpc.method_handlers_generic_handler(
        service.SERVICE_NAME,
        {
            service.INVOKE: grpc.unary_unary_rpc_method_handler(invoke),
            service.CHANNEL: grpc.stream_stream_rpc_method_handler(channel),
        },
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"echo ready on 127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(0)


if __name__ == "__main__":
    asyncio.run(main())
