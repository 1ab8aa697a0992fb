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
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer
from rocketspark.cluster import ServerProcess, write_toml
from rocketspark.errors import StoreWriteError

pytestmark = pytest.mark.integration

TMPFS_BYTES = 4 * 1024 * 1024
FILLER_BYTES = 1024 * 1024
BODY = b"x" * 60_000


def namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", "mount -t tmpfs tmpfs /mnt"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


@pytest.fixture
def small_disk_broker(tmp_path: Path) -> Iterator[tuple[LocalCluster, ServerProcess, Path]]:
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
        },
    )
    script = (
        f'mount -t tmpfs -o size={TMPFS_BYTES} tmpfs "$0" && '
        f'dd if=/dev/zero of="$0/filler" bs={FILLER_BYTES} count=1 status=none && exec "$@"'
    )
    args = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, str(data)]
    broker = ServerProcess("broker-a", [*args, sys.executable, "-m", "broker", "--conf", str(conf)], tmp_path / "b.log")
    root = str(Path(__file__).resolve().parents[2])
    broker.start({**os.environ, "PYTHONPATH": root, "PYTHONUNBUFFERED": "1"})
    try:
        yield cluster, broker, Path(f"/proc/{broker.pid}/root") / str(data).lstrip("/")
    finally:
        broker.stop()
        cluster.stop()


def test_a_full_disk_fails_sends_clearly_keeps_reads_and_recovers(
    small_disk_broker: tuple[LocalCluster, ServerProcess, Path],
) -> None:
    cluster, broker, data = small_disk_broker
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
