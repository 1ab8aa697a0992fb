"""Stubs of ``apache.rocketmq.v2`` generated from ``protos/rocketmq-apis`` (``make protos``):
do not edit; regenerate."""
