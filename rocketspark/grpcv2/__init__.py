"""The RocketMQ 5 gRPC protocol (``apache.rocketmq.v2.MessagingService``), so that the official
clients of every language work against rocketspark. ``stubs`` holds the generated code."""
