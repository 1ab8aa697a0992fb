"""Generate rocketspark/grpcv2/stubs/ from the vendored RocketMQ 5 protos (``make protos``).

Needs grpcio-tools (the ``dev`` extra). The generated modules are rewritten in two ways:

- they register their descriptors in a pool of their own (``stubs/pool.py``), not protobuf's
  default pool: the official RocketMQ client registers the same message names there from its
  own copy of the protos, and a process that imports both (a notebook with an in-process
  ``LocalCluster`` and the official client) would otherwise fail with "duplicate symbol";
- they import each other from ``rocketspark.grpcv2.stubs``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos" / "rocketmq-apis"
STUBS = ROOT / "rocketspark" / "grpcv2" / "stubs"
FILES = ("definition", "service")


def main() -> None:
    out = STUBS / "_generated"
    out.mkdir(parents=True, exist_ok=True)
    sources = [str(PROTOS / "apache" / "rocketmq" / "v2" / f"{name}.proto") for name in FILES]
    protoc = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTOS}", f"--python_out={out}"]
    subprocess.run([*protoc, f"--pyi_out={out}", f"--grpc_python_out={out}", *sources], check=True)
    generated = out / "apache" / "rocketmq" / "v2"
    for path in sorted([*generated.glob("*.py"), *generated.glob("*.pyi")]):
        text = path.read_text()
        text = text.replace("_descriptor_pool.Default()", "_pool.POOL")
        text = text.replace(
            "from google.protobuf import descriptor_pool as _descriptor_pool\n",
            "from google.protobuf import descriptor_pool as _descriptor_pool  # noqa: F401\n"
            "from rocketspark.grpcv2.stubs import pool as _pool\n",
        )
        text = text.replace("from apache.rocketmq.v2 import", "from rocketspark.grpcv2.stubs import")
        (STUBS / path.name).write_text(text)
        print(f"wrote {STUBS / path.name}")
    subprocess.run(["rm", "-rf", str(out)], check=True)


if __name__ == "__main__":
    main()
