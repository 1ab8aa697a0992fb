"""How the servers log: one line per event, as text or (``--log-format json``, or
``ROCKETSPARK_LOG_FORMAT=json``, which a LocalCluster's child servers inherit) as one JSON
object per line for a log shipper: ``ts``, ``level``, ``logger``, ``msg``, the process, and
``exc`` with the traceback when there is one. In text, a message's or a traceback's line
breaks are written as ``\\n``, so that one event is always one line."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Final

ENV_LOG_FORMAT: Final = "ROCKETSPARK_LOG_FORMAT"
FORMATS: Final = ("text", "json")
LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class OneLine(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\n", "\\n")


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,
            "thread": record.threadName,
        }
        if record.exc_info:
            event["exc"] = self.formatException(record.exc_info)
        return json.dumps(event, ensure_ascii=False)


def log_format(chosen: str | None) -> str:
    """The format asked for on the command line, else in the environment, else text."""
    value = (chosen or os.environ.get(ENV_LOG_FORMAT) or "text").lower()
    if value not in FORMATS:
        raise ValueError(f"log format {value!r} is not one of {', '.join(FORMATS)} (--log-format, {ENV_LOG_FORMAT})")
    return value


def setup(level: str = "INFO", fmt: str | None = None) -> None:
    """Log to stderr at ``level`` in the chosen format (replacing any handler set before)."""
    if level.upper() not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)} (--log-level)")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLines() if log_format(fmt) == "json" else OneLine())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
