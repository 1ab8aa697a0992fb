"""The main job (``make run``): an embedded cluster, a few thousand messages in and out.

Starts a nameserver and two brokers in this process, creates a topic on both brokers,
produces 5,000 order events (keyed by customer, so each customer's events stay in order),
reads every queue back, commits the consumer group's progress, and prints what happened.
"""

from __future__ import annotations

import json
import random
import time

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer

TOPIC = "orders"
GROUP = "order-audit"
EVENTS = 5000


def main() -> None:
    with LocalCluster(brokers=2) as cluster:
        print(f"cluster: nameserver {cluster.nameserver}, brokers {cluster.brokers}")
        with Admin(cluster.nameserver) as admin:
            admin.create_topic(TOPIC, queues=4)
            print(f"created topic {TOPIC!r} with 4 queues on each of {sorted(cluster.brokers)}")

            rng = random.Random(7)
            events = [
                {"order": i, "customer": f"c{rng.randrange(50)}", "amount": round(rng.uniform(1, 500), 2)}
                for i in range(EVENTS)
            ]
            started = time.perf_counter()
            with Producer(cluster.nameserver) as producer:
                results = producer.send_batch(
                    [
                        Message(
                            TOPIC,
                            json.dumps(e).encode(),
                            tags="big" if e["amount"] > 250 else "small",
                            keys=[str(e["order"])],
                            sharding_key=e["customer"],
                        )
                        for e in events
                    ]
                )
            elapsed = time.perf_counter() - started
            print(f"produced {EVENTS} events in {len(results)} batch requests ({EVENTS / elapsed:,.0f} msg/s)")

            total = 0.0
            count = 0
            with Consumer(cluster.nameserver) as consumer:
                for queue_id in range(len(consumer.queues(TOPIC))):
                    last_order: dict[str, int] = {}
                    for result in consumer.iter_range(TOPIC, queue_id, 0):
                        for message in result.messages:
                            event = json.loads(message.body)
                            assert last_order.get(event["customer"], -1) < event["order"], "per-key order broken"
                            last_order[event["customer"]] = event["order"]
                            total += event["amount"]
                            count += 1
                        consumer.commit_offset(GROUP, TOPIC, queue_id, result.next_offset)
                big = consumer.pull(TOPIC, 0, 0, max_messages=1000, tags="big")
            print(f"consumed {count} events, total amount {total:,.2f}; per-customer order held on every queue")
            print(f"server-side tag filter: queue 0 holds {len(big.messages)} 'big' orders")

            print("\nqueue status:")
            for row in admin.topic_status(TOPIC):
                print(
                    f"  queue {row.queue_id} on {row.broker_name}/{row.physical_queue_id}: offsets "
                    f"[{row.min_offset}, {row.max_offset})"
                )
            lag = sum(p.lag for p in admin.consumer_progress(GROUP, TOPIC))
            print(f"consumer group {GROUP!r} lag after commit: {lag}")
            counters = admin.nameserver_counters()
            print(f"nameserver requests by code: {counters['requests']}")
    print("cluster stopped")


if __name__ == "__main__":
    main()
