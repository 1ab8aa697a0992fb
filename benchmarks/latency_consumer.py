"""Consumer half of the produce-to-pull latency benchmark, run as its own process.

Follows one queue with a streaming pull (``Consumer.follow``) and, for every message,
records now minus the send time the producer wrote into the body (CLOCK_MONOTONIC, shared
by processes on one machine). Prints a JSON list of latencies in microseconds once it has
seen ``count`` messages, read from ``offset`` on (the queue's end when it starts: what earlier
runs left there is not this run's).
"""

from __future__ import annotations

import json
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rocketspark import Consumer, PullStatus


def main(nameserver: str, topic: str, count: int, offset: int) -> None:
    latencies: list[int] = []
    with Consumer(nameserver) as consumer:
        print("consumer ready", flush=True)
        for result in consumer.follow(topic, 0, offset, window_ms=5000):
            now = time.monotonic_ns()
            if result.status is PullStatus.FOUND:
                for message in result.messages:
                    (sent,) = struct.unpack_from(">q", message.body)
                    latencies.append((now - sent) // 1000)
            if len(latencies) >= count:
                break
    print(json.dumps(latencies), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
