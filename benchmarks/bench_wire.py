"""Wire benchmark: one message per send, against Redis Streams and NATS JetStream, same run.

Most producers send one message per request and wait for its acknowledgement (a service
emitting events). This measures that pattern on this machine against the brokers a user would
pick instead, started here from Debian's packages (installed with apt-get when missing; their
Python clients, redis-py with hiredis and nats-py, with pip):

- Redis Streams: ``redis-server --appendonly yes --appendfsync everysec`` (XADD per message);
- NATS JetStream: ``nats-server -js`` with a file-stored stream (a publish awaiting its ack);
- rocketspark: one broker process (async flush, as both peers flush asynchronously), the
  ``Producer`` sending over RocketMQ's remoting frames on TCP.

Figures, 1 KiB bodies unless noted:

1. 4 processes x 8 threads (JetStream: 8 concurrent publishes per process, its client being
   asyncio), one message per send, each waiting for its ack: msg/s of each system, the server's
   CPU per message (from ``/proc``) and its clients' (each sending process's own CPU time over
   its sends). Targets: >= 1.0x Redis and >= 0.8x JetStream; the broker at most 25 us of CPU
   per send.
2. One thread, one message at a time, in a sending process of its own as in 1: the same figures.
   Target: >= 1.0x JetStream.
3. Produce to pull latency, one message per send, a consumer in another process following the
   queue: p99 at 1,000 msg/s offered (target <= 1 ms); the rate reached with 10,000 sends a
   second offered from one process, and its p99 (target: reached, p99 <= 2 ms).
4. 100 B ingest in 1,000-message batches from 4 threads, against a do-nothing server receiving
   the same frames (``echo_server.py``): targets >= 1.2M msg/s and >= 0.5x the do-nothing server.
   Also the same records built once and sent as they are (``Producer.send_to_queue``, as the
   Spark sink sends what it builds from Arrow): the broker's share, the client's encoding aside.

Usage: ``python benchmarks/bench_wire.py [--seconds 10] [--profile DIR]``. With ``--profile``,
py-spy records the broker during figure 1 (a flame graph SVG per run in DIR).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_broker

from rocketspark import Admin, LocalCluster, Message, Producer, compiled

BODY = os.urandom(1024)
PROCESSES, THREADS = 4, 8
TOPIC = "wire"


# -- the peers ---------------------------------------------------------------------------------


def ensure_tools() -> None:
    missing = [
        pkg
        for pkg, binary in (("redis-server", "redis-server"), ("nats-server", "nats-server"))
        if not shutil.which(binary)
    ]
    if missing:
        print(f"installing {', '.join(missing)} with apt-get", flush=True)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", *missing],
            check=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    try:
        import nats  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        print("installing redis[hiredis] and nats-py with pip", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "redis[hiredis]>=5", "nats-py>=2.6"], check=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_port(port: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--dir",
            str(directory),
            "--protected-mode",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    wait_port(port)
    return proc, port


def start_nats(directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        ["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(port)

    async def make_stream() -> None:
        import nats

        connection = await nats.connect(f"nats://127.0.0.1:{port}")
        await connection.jetstream().add_stream(name="bench", subjects=[TOPIC])
        await connection.close()

    asyncio.run(make_stream())
    return proc, port


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the senders (each in a process of its own) -------------------------------------------------


class Sent(NamedTuple):
    """What one sending process did: its sends, and the CPU it used for them (every thread of
    it, the client library's own included), so that each system's clients are measured, not
    derived from what the server left of the machine."""

    sends: int
    cpu_s: float


def _send_threads(send: Callable[[], object], threads: int, seconds: float) -> Sent:
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def work(k: int) -> None:
        while time.monotonic() < stop:
            send()
            counts[k] += 1

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    began = time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return Sent(sum(counts), time.process_time() - began)


def rocketspark_sender(nameserver: str, threads: int, seconds: float, start_at: float) -> Sent:
    with Producer(nameserver) as producer:
        producer.send(Message(TOPIC, BODY))  # route and connection made before the clock starts
        time.sleep(max(0.0, start_at - time.time()))
        return _send_threads(lambda: producer.send(Message(TOPIC, BODY)), threads, seconds)


def redis_sender(port: int, threads: int, seconds: float, start_at: float) -> Sent:
    import redis

    client = redis.Redis(port=port, max_connections=threads)
    client.xadd(TOPIC, {"b": BODY})
    time.sleep(max(0.0, start_at - time.time()))
    return _send_threads(lambda: client.xadd(TOPIC, {"b": BODY}), threads, seconds)


def nats_sender(port: int, threads: int, seconds: float, start_at: float) -> Sent:
    import nats

    async def run() -> Sent:
        connection = await nats.connect(f"nats://127.0.0.1:{port}")
        js = connection.jetstream()
        await js.publish(TOPIC, BODY)
        await asyncio.sleep(max(0.0, start_at - time.time()))
        stop = time.monotonic() + seconds
        counts = [0] * threads

        async def work(k: int) -> None:
            while time.monotonic() < stop:
                await js.publish(TOPIC, BODY)
                counts[k] += 1

        began = time.process_time()
        await asyncio.gather(*(work(k) for k in range(threads)))
        used = time.process_time() - began
        await connection.close()
        return Sent(sum(counts), used)

    return asyncio.run(run())


class Rate(NamedTuple):
    """One pattern against one system: msg/s, and CPU microseconds a message of its server and
    of its clients (all their processes, each counted over its own sending)."""

    rate: float
    server_us: float
    clients_us: float


def fan_out(sender: Callable[..., Sent], target: Any, processes: int, threads: int, seconds: float) -> list[Sent]:
    """What ``processes`` processes of ``threads`` senders each did, started together."""
    start_at = time.time() + 3.0  # every process connected and warm before it
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        results = [pool.apply_async(sender, (target, threads, seconds, start_at)) for _ in range(processes)]
        return [r.get(timeout=seconds + 120) for r in results]


def measured(pid: int, run: Callable[[], list[Sent]], seconds: float) -> Rate:
    """``run``'s rate, and its server's (``pid``) and clients' CPU a message."""
    before = cpu_seconds(pid)
    sent = run()
    used = cpu_seconds(pid) - before
    count = sum(s.sends for s in sent)
    return Rate(count / seconds, used / count * 1e6, sum(s.cpu_s for s in sent) / count * 1e6)


# -- the run ------------------------------------------------------------------------------------


def profiled(pid: int, directory: Path | None, name: str, seconds: float) -> subprocess.Popen[bytes] | None:
    if directory is None:
        return None
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    out = directory / f"{name}.svg"
    return subprocess.Popen(
        [spy, "record", "-p", str(pid), "-d", str(int(seconds) + 4), "-o", str(out), "-r", "200"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def table(rates: dict[str, Rate]) -> None:
    print(f"   {'system':<12} {'msg/s':>10} {'server CPU/msg':>15} {'clients CPU/msg':>16}")
    for name, rate in rates.items():
        print(f"   {name:<12} {rate.rate:>10,.0f} {rate.server_us:>12.1f} us {rate.clients_us:>13.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each throughput run")
    parser.add_argument("--profile", type=Path, help="record the broker with py-spy into this directory")
    args = parser.parse_args()
    seconds = args.seconds
    compiled.require_fresh()
    ensure_tools()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-wire-"))
    (work / "redis").mkdir()
    (work / "nats").mkdir()
    redis_proc, redis_port = start_redis(work / "redis")
    nats_proc, nats_port = start_nats(work / "nats")
    echo, echo_address = bench_broker.start_echo()
    try:
        with LocalCluster(brokers=1, processes=True, broker_config={"auto_create_topic_enable": False}) as cluster:
            ns = cluster.nameserver
            with Admin(ns) as admin:
                admin.create_topic(TOPIC, queues=8)
                admin.create_topic("latency-1024", queues=1)
                admin.create_topic("batches", queues=4)
            broker_pid = cluster.broker_pid("broker-a")
            assert broker_pid is not None
            spy = profiled(broker_pid, args.profile, "broker-4x8", seconds)
            fanned = {
                "rocketspark": measured(
                    broker_pid, lambda: fan_out(rocketspark_sender, ns, PROCESSES, THREADS, seconds), seconds
                )
            }
            if spy is not None:
                spy.wait()
            fanned["Redis"] = measured(
                redis_proc.pid, lambda: fan_out(redis_sender, redis_port, PROCESSES, THREADS, seconds), seconds
            )
            fanned["JetStream"] = measured(
                nats_proc.pid, lambda: fan_out(nats_sender, nats_port, PROCESSES, THREADS, seconds), seconds
            )
            single = {
                "rocketspark": measured(broker_pid, lambda: fan_out(rocketspark_sender, ns, 1, 1, seconds), seconds),
                "Redis": measured(redis_proc.pid, lambda: fan_out(redis_sender, redis_port, 1, 1, seconds), seconds),
                "JetStream": measured(nats_proc.pid, lambda: fan_out(nats_sender, nats_port, 1, 1, seconds), seconds),
            }
            _, _, p99_1k = bench_broker.latency(ns, "latency-1024", 1024, 5000, 1000, 1)
            reached, _, p99_10k = bench_broker.latency(ns, "latency-1024", 1024, 30_000, 10_000, 1)
            batch = [Message("batches", b"x" * 100) for _ in range(1000)]
            ingest = max(bench_broker.ingest_broker(ns, batch, 600) for _ in range(2))
            built = max(bench_broker.ingest_records(ns, batch, 1200, queues=4) for _ in range(2))
            ceiling = max(bench_broker.ingest_echo(echo_address, batch, 600) for _ in range(2))
    finally:
        for proc in (redis_proc, nats_proc, echo):
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)

    def verdict(ok: bool) -> str:
        return "meets" if ok else "MISSES"

    print(f"\nwire benchmark: 1 KiB bodies, one message per send, each waiting for its ack ({seconds:g} s runs)")
    print(f"rocketspark's send path: {compiled.summary()}")
    print(f"\n1. {PROCESSES} processes x {THREADS} senders")
    table(fanned)
    ours, redis_rate, nats_rate = (fanned[name].rate for name in ("rocketspark", "Redis", "JetStream"))
    ours_cpu = fanned["rocketspark"].server_us
    print(
        f"   ratios: {ours / redis_rate:.2f}x Redis ({verdict(ours >= redis_rate)} >= 1.0), {ours / nats_rate:.2f}x "
        f"JetStream ({verdict(ours >= 0.8 * nats_rate)} >= 0.8); broker CPU {ours_cpu:.1f} us a send "
        f"({verdict(ours_cpu <= 25)} <= 25 us)"
    )
    print("\n2. one thread, one message at a time")
    table(single)
    ratio = single["rocketspark"].rate / single["JetStream"].rate
    print(f"   ratio to JetStream {ratio:.2f} ({verdict(ratio >= 1.0)} >= 1.0)")
    print("\n3. produce to pull latency (a consumer in another process follows the queue)")
    print(f"   1,000 msg/s offered: p99 {p99_1k:.2f} ms ({verdict(p99_1k <= 1.0)} <= 1 ms)")
    print(
        f"   10,000 sends/s offered from one process: {reached:,.0f} reached ({verdict(reached >= 9_500)} >= 9,500), "
        f"p99 {p99_10k:.2f} ms ({verdict(p99_10k <= 2.0)} <= 2 ms)"
    )
    print("\n4. 100 B ingest in 1,000-message batches, 4 threads (best of 2)")
    print(
        f"   {ingest:,.0f} msg/s ({verdict(ingest >= 1_200_000)} >= 1.2M); a do-nothing server receiving the same "
        f"frames {ceiling:,.0f}: ratio {ingest / ceiling:.2f} ({verdict(ingest >= 0.5 * ceiling)} >= 0.5x)"
    )
    print(
        f"   the same records built once and sent as they are (send_to_queue, as the Spark sink sends): {built:,.0f} "
        f"msg/s, ratio {built / ceiling:.2f}: what the broker takes, the client's encoding of Message objects aside"
    )
    if args.profile is not None:
        print(f"\nbroker profile (py-spy) of run 1: {args.profile / 'broker-4x8.svg'}")


if __name__ == "__main__":
    main()
