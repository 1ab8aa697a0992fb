"""A do-nothing server of RocketMQ remoting frames: the transport's ceiling.

It answers every request with the same tiny success response (a send's answer fields), reading
nothing of the request but its header's ``opaque``; bodies are skipped as they arrive. It runs
on the loop the servers run on (uvloop), so a benchmark that sends it the broker's exact
requests measures what the wire, the event loop and our client cost, with no broker work.
Prints ``echo ready on <host>:<port>``.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import loops
from rocketspark.protocol.codes import Flag
from rocketspark.remoting import frame

EXT = {"queueId": 0, "queueOffset": 0, "count": 100, "msgId": "0", "status": "SEND_OK"}


def reply(opaque: int) -> bytes:
    header: bytes = msgpack.packb([0, opaque, Flag.RESPONSE, "", EXT], use_bin_type=True)
    return frame.PREFIX.pack(4 + len(header), (frame.MSGPACK << 24) | len(header)) + header


class Echo(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = bytearray()
        self.skip = 0  # body bytes still to drop
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self.skip:
            dropped = min(self.skip, len(data))
            self.skip -= dropped
            data = data[dropped:]
        self.buffer += data
        buf, pos, out = self.buffer, 0, []
        while len(buf) - pos >= 8:
            length, word = frame.PREFIX.unpack_from(buf, pos)
            header_bytes = frame.header_length(word)
            if len(buf) - pos - 8 < header_bytes:
                break
            opaque = msgpack.unpackb(buf[pos + 8 : pos + 8 + header_bytes])[1]
            out.append(reply(opaque))
            end = pos + 4 + length
            if end > len(buf):
                self.skip = end - len(buf)
                pos = len(buf)
                break
            pos = end
        del buf[:pos]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


async def main() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"echo ready on 127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    loops.run(main())
