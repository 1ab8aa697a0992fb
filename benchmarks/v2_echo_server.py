"""A do-nothing RocketMQ 5 (v2) server: the ceiling the official client's send rate is compared to.

It answers what a producer needs and nothing more: ``QueryRoute`` with one queue on itself,
``Telemetry`` with the same settings our endpoint gives, ``Heartbeat``, and ``SendMessage``
with an OK entry echoing the client's message id, storing nothing. Prints
``v2 echo ready on <host>:<port>``.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from grpc import aio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark.grpcv2 import settings
from rocketspark.grpcv2.server import method_handlers
from rocketspark.grpcv2.stubs import definition_pb2 as pb
from rocketspark.grpcv2.stubs import service_pb2 as sv

OK = pb.Status(code=pb.Code.OK)
MAX_BODY_BYTES = 4 * 1024 * 1024  # what our broker allows by default (max_message_bytes)


class Echo:
    def __init__(self) -> None:
        self.port = 0

    async def QueryRoute(self, request: sv.QueryRouteRequest, context: Any) -> sv.QueryRouteResponse:  # noqa: N802
        endpoints = pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=self.port)])
        queue = pb.MessageQueue(
            topic=request.topic,
            id=0,
            permission=pb.Permission.READ_WRITE,
            broker=pb.Broker(name="echo", id=0, endpoints=endpoints),
            accept_message_types=[pb.MessageType.NORMAL, pb.MessageType.FIFO],
        )
        return sv.QueryRouteResponse(status=OK, message_queues=[queue])

    async def Heartbeat(self, request: Any, context: Any) -> sv.HeartbeatResponse:  # noqa: N802
        return sv.HeartbeatResponse(status=OK)

    async def NotifyClientTermination(self, request: Any, context: Any) -> sv.NotifyClientTerminationResponse:  # noqa: N802
        return sv.NotifyClientTerminationResponse(status=OK)

    async def Telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[sv.TelemetryCommand]:  # noqa: N802
        async for command in requests:
            if command.HasField("settings"):
                yield sv.TelemetryCommand(status=OK, settings=settings.merged(command.settings, MAX_BODY_BYTES))

    async def SendMessage(self, request: sv.SendMessageRequest, context: Any) -> sv.SendMessageResponse:  # noqa: N802
        entries = [
            sv.SendResultEntry(status=OK, message_id=m.system_properties.message_id, offset=0) for m in request.messages
        ]
        return sv.SendMessageResponse(status=OK, entries=entries)


async def main() -> None:
    echo = Echo()
    server = aio.server()
    server.add_generic_rpc_handlers((method_handlers(echo),))
    echo.port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"v2 echo ready on 127.0.0.1:{echo.port}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0)


if __name__ == "__main__":
    asyncio.run(main())
