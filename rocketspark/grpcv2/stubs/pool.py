"""The descriptor pool the v2 stubs live in: their own, not protobuf's default one.

The official RocketMQ Python client registers the same message names (``apache.rocketmq.v2.*``)
in the default pool from its own copy of the protos; one process may hold both (a notebook
with an in-process cluster and the official client), so ours must not collide with them.
"""

from google.protobuf import descriptor_pool, duration_pb2, timestamp_pb2

POOL = descriptor_pool.DescriptorPool()
POOL.AddSerializedFile(duration_pb2.DESCRIPTOR.serialized_pb)
POOL.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
