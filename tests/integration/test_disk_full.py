"""A broker whose disk fills up: sends fail with a clear error, the broker stays up and serves
reads, and writes resume when space returns.

The small file system is a 4 MiB tmpfs mounted in a user and mount namespace of the broker's
own (``unshare --user --map-root-user --mount``), which needs no privileges: the broker sees
the tmpfs at its data directory, nobody else does. The test reaches the files through
``/proc/<broker pid>/root``, which shows the broker's view of the file system.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.cluster import ServerProcess, write_toml
from rocketspark.errors import DiskFullError, StoreWriteError
from rocketspark.ports import free_port
from rocketspark.protocol.types import PullStatus

pytestmark = pytest.mark.integration

TMPFS_BYTES = 4 * 1024 * 1024
FILLER_BYTES = 1024 * 1024
BODY = b"x" * 60_000


def namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", "mount -t tmpfs tmpfs /mnt"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


SmallDisk = tuple[LocalCluster, ServerProcess, Path]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[..., SmallDisk]]:
    """Start a broker on a 4 MiB tmpfs holding a ``filler`` file, with ``config`` on top of
    the test's broker config."""
    started: list[tuple[LocalCluster, ServerProcess]] = []

    def start(config: dict[str, object], filler_bytes: int = FILLER_BYTES) -> SmallDisk:
        cluster, broker, data = _start_small_disk(tmp_path, config, filler_bytes)
        started.append((cluster, broker))
        return cluster, broker, data

    yield start
    for cluster, broker in started:
        broker.stop()
        cluster.stop()


def _start_small_disk(tmp_path: Path, config: dict[str, object], filler_bytes: int) -> SmallDisk:
    if not namespaces_work():
        pytest.fail("this test needs unprivileged user namespaces (unshare --user --mount) to make a small tmpfs")
    cluster = LocalCluster(brokers=0, processes=True).start()
    data = tmp_path / "broker-a"
    data.mkdir()
    conf = tmp_path / "broker-a.toml"
    write_toml(
        conf,
        {
            "broker_name": "broker-a",
            "listen_host": "127.0.0.1",
            "listen_port": 0,
            "data_dir": str(data),
            "nameservers": [cluster.nameserver],
            "auto_create_topic_enable": False,
            "segment_bytes": 1024 * 1024,
            "max_message_bytes": 128 * 1024,
            "flush_interval_ms": 50,
            **config,
        },
    )
    script = (
        f'mount -t tmpfs -o size={TMPFS_BYTES} tmpfs "$0" && '
        f'dd if=/dev/zero of="$0/filler" bs={filler_bytes} count=1 status=none && exec "$@"'
    )
    args = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, str(data)]
    broker = ServerProcess("broker-a", [*args, sys.executable, "-m", "broker", "--conf", str(conf)], tmp_path / "b.log")
    root = str(Path(__file__).resolve().parents[2])
    try:
        broker.start({**os.environ, "PYTHONPATH": root, "PYTHONUNBUFFERED": "1"})
    except BaseException:
        cluster.stop()
        raise
    return cluster, broker, Path(f"/proc/{broker.pid}/root") / str(data).lstrip("/")


def test_a_full_disk_fails_sends_clearly_keeps_reads_and_recovers(small_disk: Callable[..., SmallDisk]) -> None:
    # no disk-use limits: the disk really runs full (ENOSPC)
    cluster, broker, data = small_disk({"disk_max_used_ratio": 1.0, "disk_refuse_writes_ratio": 1.0})
    with Admin(cluster.nameserver) as admin:
        admin.create_topic("filling", queues=1)
    stored: list[bytes] = []
    with Producer(cluster.nameserver, retry_times_when_send_failed=0) as producer:
        with pytest.raises(StoreWriteError) as refused:
            for i in range(200):  # 200 x 60 KB is three times the disk
                body = BODY + str(i).encode()
                producer.send(Message("filling", body, queue_id=0))
                stored.append(body)
        assert "No space left on device" in refused.value.message
        assert "nothing of this send was stored" in refused.value.message
        assert 20 < len(stored) < 60

        assert broker.alive()
        with Consumer(cluster.nameserver) as consumer:  # every acknowledged message reads back
            got = [m.body for pulled in consumer.iter_range("filling", 0, 0, len(stored)) for m in pulled.messages]
            assert got == stored
            with pytest.raises(StoreWriteError):  # still full: still refused, still up
                producer.send(Message("filling", BODY, queue_id=0))

            (data / "filler").unlink()  # space returns
            result = producer.send(Message("filling", b"after", queue_id=0))
            assert result.queue_offset == len(stored)  # no offset was lost or handed out twice
            after = consumer.pull("filling", 0, len(stored)).messages
            assert [m.body for m in after] == [b"after"]
    assert broker.alive()
    assert "SIGBUS" not in broker.tail()


def _fill(path: Path, size: int) -> None:
    """Write ``size`` bytes to ``path`` in pieces, waiting while the disk is full (the broker
    deletes its oldest segments meanwhile)."""
    deadline = time.monotonic() + 20
    with open(path, "ab") as out:
        while out.tell() < size:
            try:
                out.write(bytes(min(128 * 1024, size - out.tell())))
                out.flush()
            except OSError:
                assert time.monotonic() < deadline, f"could not write {size} bytes to {path}"
                out.seek(0, os.SEEK_END)
                time.sleep(0.2)


def _sent(producer: Producer, body: bytes) -> int:
    return producer.send(Message("filling", body, queue_id=0)).queue_offset


def test_disk_use_deletes_the_oldest_segments_then_refuses_writes_until_space_is_freed(
    small_disk: Callable[..., SmallDisk],
) -> None:
    """disk_max_used_ratio (75%): the oldest segments go first, loudly; disk_refuse_writes_ratio
    (90%): sends are refused with a clear error; nothing acknowledged and not deleted by the
    first rule is lost, and sends are taken again once space is freed."""
    metrics_port = free_port()
    cluster, broker, data = small_disk(
        {
            "segment_bytes": 256 * 1024,
            "max_message_bytes": 64 * 1024,
            "retention_check_interval_ms": 100,
            "metrics_port": metrics_port,
        },
        filler_bytes=2 * 1024 * 1024,  # half the disk
    )

    def metric(name: str, **labels: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            families = text_string_to_metric_families(response.read().decode())
        return sum(
            x.value
            for f in families
            for x in f.samples
            if x.name == name and all(x.labels.get(k) == v for k, v in labels.items())
        )

    with Admin(cluster.nameserver) as admin:
        admin.create_topic("filling", queues=1)
    acked: dict[int, bytes] = {}
    with Producer(cluster.nameserver, retry_times_when_send_failed=0) as producer, Consumer(cluster.nameserver) as c:
        for i in range(80):  # 2.4 MB more: past 75% of the disk, never past 90% while segments can go
            body = b"m" * 30_000 + str(i).encode()
            acked[_sent(producer, body)] = body
            time.sleep(0.02)
        first = c.min_offset("filling", 0)
        assert first > 0  # the oldest segments went first
        assert "above disk_max_used_ratio (75%): deleted the oldest commit-log segment" in broker.tail(200)
        assert metric("rocketspark_storage_segments_deleted_total", reason="disk") >= 1
        assert metric("rocketspark_storage_segments_deleted_total", reason="retention") == 0

        def readable() -> None:  # every acknowledged message the rule did not delete reads back
            for _ in range(50):  # the rule may still be deleting: a read whose next offset went ends OFFSET_ILLEGAL
                low = c.min_offset("filling", 0)
                results = list(c.iter_range("filling", 0, low))
                if not results or results[-1].status is not PullStatus.OFFSET_ILLEGAL:
                    break  # read to the end; else read again from where the queue now starts
            got = {m.queue_offset: m.body for r in results for m in r.messages}
            low = max(low, c.min_offset("filling", 0))  # segments may go while it reads: compare what is left
            assert {o: b for o, b in got.items() if o >= low} == {o: b for o, b in acked.items() if o >= low}

        readable()
        _fill(data / "filler2", 1400 * 1024)  # someone else fills the disk: over 90% with us, as small as we get
        deadline = time.monotonic() + 10
        refused: DiskFullError | None = None
        while refused is None and time.monotonic() < deadline:
            try:
                acked[_sent(producer, b"late")] = b"late"
            except DiskFullError as exc:
                refused = exc
            except StoreWriteError:  # the disk filled before the next check saw it: ENOSPC, nothing stored
                time.sleep(0.1)
        assert refused is not None, "sends were never refused"
        assert "above disk_refuse_writes_ratio (90%); nothing of this send was stored" in refused.message
        assert "Free space on the file system of" in refused.message
        assert metric("rocketspark_disk_refusing_writes") == 1
        assert metric("rocketspark_disk_used_ratio") > 0.9
        readable()
        assert broker.alive()

        (data / "filler2").unlink()  # space is freed
        end = c.max_offset("filling", 0)
        deadline = time.monotonic() + 10
        while True:
            try:
                offset = _sent(producer, b"back")
                break
            except StoreWriteError:
                assert time.monotonic() < deadline, "sends were not taken again after space was freed"
                time.sleep(0.2)
        assert offset == end  # no offset lost or handed out twice
        assert [m.body for m in c.pull("filling", 0, offset).messages] == [b"back"]
        assert metric("rocketspark_disk_refusing_writes") == 0
    assert "sends are taken again" in broker.tail(200)
