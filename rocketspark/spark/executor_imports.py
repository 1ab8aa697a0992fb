"""What an executor without rocketspark is told.

Spark ships the connector's readers, writers and partitions to executors as pickles that name
their classes, so an executor whose Python lacks rocketspark would fail deep inside its worker
with a bare ``ModuleNotFoundError``. Instead these objects pickle through ``restore``, and this
module is pickled *by value* (``cloudpickle.register_pickle_by_value``): an executor runs
``restore`` without importing anything of ours, and when the classes cannot be imported it
raises an error that says what to pass to spark-submit.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

from pyspark import cloudpickle

OURS = ("rocketspark", "pyspark_rocketmq", "broker", "nameserver")  # top-level packages of the distribution
SHIP = (
    "Ship it with the job: `rocketspark package-job job.py -o job-env.tar.gz`, then spark-submit --archives "
    "job-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python (see the README, "
    "'Running on a cluster')"
)
HOW_TO_SHIP = "rocketspark is not installed in the Python this Spark executor runs ({python}): {missing}. " + SHIP
HALF_SHIPPED = (
    "rocketspark is installed in the Python this Spark executor runs ({python}), but its dependency "
    "{module!r} is not: {missing}. Was the archive made for another Python or by hand? " + SHIP
)


class MissingOnExecutor(RuntimeError):
    """An executor's Python cannot import the connector."""


def restore(payload: bytes) -> Any:
    """Rebuild an object ``Guarded.__reduce__`` pickled, or say how to ship rocketspark."""
    try:
        cls, state = pickle.loads(payload)
    except ModuleNotFoundError as exc:
        module = (exc.name or "").split(".")[0]
        text = HOW_TO_SHIP if module in OURS or not module else HALF_SHIPPED
        raise MissingOnExecutor(text.format(python=sys.executable, missing=exc, module=module)) from None
    obj = cls.__new__(cls)
    if hasattr(obj, "__setstate__"):
        obj.__setstate__(state)
    else:
        obj.__dict__.update(state)
    return obj


class Guarded:
    """Pickles through ``restore`` (mixed into what travels to executors)."""

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        state = self.__getstate__()
        return restore, (pickle.dumps((type(self), state), protocol=pickle.HIGHEST_PROTOCOL),)


# Whatever imports a Guarded class imports this module first: from then on what Spark ships
# carries this module's code, so an executor without rocketspark can still run ``restore``.
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
