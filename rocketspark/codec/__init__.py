"""The record codec: the batch record layout and every encoder and decoder of it.

The layout is drawn once, in :mod:`rocketspark.codec.layout`; everything else that reads or
writes record bytes (the producer, the broker's store, the consumer, the Spark reader and
sink) goes through this package.
"""
