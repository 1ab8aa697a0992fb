"""The gRPC method table, written by hand the way a generated stub would be (no protobuf).

Two methods carry every RemotingCommand:

- ``/rocketspark.v1.Remoting/Channel`` (bidirectional streaming): the client keeps one open
  per peer and sends every request on it; responses come back on it in any order, matched to
  requests by ``opaque`` (RocketMQ's remoting model). Sync, async and oneway calls all use it;
  a oneway request has the ONEWAY flag and the server answers it at once, before the work.
- ``/rocketspark.v1.Remoting/Invoke`` (unary): one request command, one response command;
  the same handlers, for tools and simple clients.
- ``/rocketspark.v1.Remoting/Stream`` (server streaming): one request command, then any
  number of response commands. Two uses: OPEN_PUSH_STREAM, which a client keeps open so the
  server can push commands to it (route-change notifications); and a streaming PULL_MESSAGE,
  where the broker sends each batch as soon as it is stored instead of waiting for the next
  pull (the lowest produce-to-consume latency).

Payloads are msgpack (see :mod:`rocketspark.protocol.command`). The server receives raw bytes
and decodes them itself, so that a malformed request gets a readable response instead of a
bare gRPC INTERNAL status.
"""

from __future__ import annotations

from typing import Final

SERVICE_NAME: Final = "rocketspark.v1.Remoting"
INVOKE: Final = "Invoke"
CHANNEL: Final = "Channel"
STREAM: Final = "Stream"
INVOKE_PATH: Final = f"/{SERVICE_NAME}/{INVOKE}"
CHANNEL_PATH: Final = f"/{SERVICE_NAME}/{CHANNEL}"
STREAM_PATH: Final = f"/{SERVICE_NAME}/{STREAM}"

# grpc's default 4 MiB limit is below one maximal message plus framing; allow big batches
# and pull responses. Producers and the broker still enforce their own per-message limit.
MAX_GRPC_MESSAGE_BYTES: Final = 256 * 1024 * 1024

CHANNEL_OPTIONS: Final = (
    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
    # Reconnect quickly after a peer restarts instead of backing off for up to two minutes.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.enable_retries", 0),
)

SERVER_OPTIONS: Final = (
    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    # Ping clients too: a client whose host vanished (no FIN, no RST) is found dead within
    # about 80 s, and what belongs to its streams (route subscriptions) goes with them.
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    # A fixed 4 MiB window per stream instead of one grown by bandwidth probing: while the
    # event loop is busy, each client stream can push at most this much ahead of it, so the
    # bytes a server holds stay near its in-flight budget (10 clients sending 64 MiB at once:
    # peak RSS about 470 MB, 490-790 MB with probing). Throughput on 4 MiB batches unchanged.
    ("grpc.http2.bdp_probe", 0),
    ("grpc.http2.lookahead_bytes", 4 * 1024 * 1024),
)
