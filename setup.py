"""Builds rocketspark with a send's path (the broker's side, the client's connection) compiled
by mypyc; everything else about the package is in pyproject.toml.

One message per send costs the broker its Python: reading the frame, checking the record,
storing it and answering took about 36 us of interpreter time a send. mypyc (mypy's compiler,
the one mypy and black ship with) turns these typed modules into C extensions from the same
source, so each concept still lives in one place, and it enforces their annotations at run
time. The modules stay plain Python where it cannot run: ``ROCKETSPARK_COMPILE=0``, no mypyc
(pip's isolated build, unless given ``--no-build-isolation`` with mypy installed), no C compiler
or no Python headers. Where it can, a failure fails the build: the extensions share one library,
and installing some without it would leave a package that cannot be imported.
``rocketspark.compiled`` tells which way a module was loaded.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup

# The path of a single send: the broker's side, the client's connection, and the codec both
# ends share. A module here must not use what mypyc does not compile (async generators, nested
# classes), must not be subclassed, patched or weakly referenced from plain Python, must not
# name an attribute ``_thread`` (its C name clashes with the ``__thread`` keyword), and must
# not call anything that acts in a slice's bounds (mypyc may compute them twice).
# tests/unit/test_compiled.py holds these rules.
COMPILED = [
    "rocketspark/remoting/server_connection.py",
    "rocketspark/remoting/server.py",
    "rocketspark/remoting/frame.py",
    "rocketspark/remoting/admission.py",
    "rocketspark/remoting/eager.py",
    "rocketspark/remoting/connection.py",
    "rocketspark/remoting/waiter.py",
    "rocketspark/protocol/command.py",
    "rocketspark/protocol/headers.py",
    "rocketspark/protocol/validation.py",
    "rocketspark/protocol/packing.py",
    "rocketspark/protocol/shapes/__init__.py",
    "rocketspark/protocol/shapes/declared.py",
    "rocketspark/codec/ingest.py",
    "rocketspark/codec/sent.py",
    "rocketspark/codec/plain.py",
    "rocketspark/codec/build.py",
    "rocketspark/codec/ids.py",
    "rocketspark/codec/layout.py",
    "rocketspark/codec/few.py",  # a consumer's small pulls, read field by field
    "rocketspark/codec/messages.py",
    "broker/handlers/send.py",
    "broker/store/store.py",
    "broker/store/values.py",
    "broker/store/commitlog.py",
    "broker/store/consumequeue.py",
    "broker/store/mappedfile.py",
    "broker/store/stats.py",
    "broker/store/queues.py",
    "broker/store/keyindex.py",  # its thread parses every stored record for keys
    "broker/store/keydb.py",
    "broker/store/reading.py",  # a pull's read: every message a follower is pushed
    "broker/store/entrycheck.py",
    "broker/dedupe.py",
    "broker/longpoll.py",
    "broker/ha/replication.py",
    "broker/ha/role.py",
    "broker/diskuse.py",
    "broker/topics.py",
    "broker/trace.py",
    "broker/static_topics.py",
    "rocketspark/metrics/tally.py",  # every request's latency, counted
]


def why_plain() -> str | None:
    """Why the modules cannot be compiled here, or None when they can."""
    if os.environ.get("ROCKETSPARK_COMPILE", "1") == "0":
        return "ROCKETSPARK_COMPILE=0"
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypyc is not installed (pip's isolated build: use --no-build-isolation with mypy installed)"
    compiler = str(sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers (Python.h)"
    return None


# setuptools' commands that build extensions; pip's metadata step (egg_info, dist_info) is not
# one, and compiling for it too would type-check and translate the modules once more for nothing.
BUILDING = {"build", "build_ext", "bdist_wheel", "install", "develop", "editable_wheel"}


def extensions(commands: list[str]) -> list[Extension]:
    if not BUILDING & set(commands):
        return []
    why = why_plain()
    if why is not None:
        print(f"rocketspark: not compiling the broker's request path: {why}", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    # Errors in the modules compiled fail the build; the modules they import are type-checked
    # by `make check`, not here, so a new stub release cannot stop a build.
    return list(mypycify(["--follow-imports=silent", *COMPILED], opt_level="3"))


if __name__ == "__main__":  # as setuptools runs it; the tests import it for COMPILED and why_plain
    setup(ext_modules=extensions(sys.argv[1:]))
