"""The data-loss rule of the source (the option ``failOnDataLoss``), in one place.

Offsets a query planned or was about to plan can be gone: retention deleted them before the
driver planned them (``source``), or they are missing from a planned slice when an executor
reads it (``reading``). Either way the query fails naming the queue and the lost range, or,
with ``failOnDataLoss=false``, logs it and skips exactly that range.
"""

from __future__ import annotations

import logging

from rocketspark.errors import DataLossError

SKIP_HINT = '. Set the option failOnDataLoss to "false" to skip lost offsets instead.'


def lost(fail: bool, topic: str, queue_id: int, low: int, high: int, what: str, log: logging.Logger) -> None:
    """Logical offsets ``[low, high)`` of a queue cannot be read (``what`` says why): raise
    DataLossError when ``fail``, else warn on the caller's ``log`` and let it skip them."""
    message = f"data loss in topic {topic} logical queue {queue_id}: offsets [{low}, {high}) {what}"
    if fail:
        raise DataLossError(message + SKIP_HINT)
    log.warning("%s; skipped (failOnDataLoss=false)", message)
