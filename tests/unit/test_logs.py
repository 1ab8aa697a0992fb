"""Log lines: one event a line, as text or JSON."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from rocketspark.logs import JsonLines, OneLine, log_format


def record(message: str, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise ValueError("boom\nsecond line")
        except ValueError:
            info = sys.exc_info()
    return logging.LogRecord("broker", logging.WARNING, __file__, 1, message, (), info)


def test_text_keeps_an_event_on_one_line_tracebacks_included() -> None:
    line = OneLine().format(record("a message\nwith a break", exc=True))
    assert "\n" not in line
    assert "WARNING broker: a message\\nwith a break" in line and "ValueError: boom\\nsecond line" in line


def test_json_is_one_object_per_line_with_the_traceback() -> None:
    line = JsonLines().format(logging.LogRecord("broker", logging.WARNING, __file__, 1, "stored %d", (5,), None))
    event = json.loads(line)
    assert event["msg"] == "stored 5" and event["level"] == "WARNING" and event["logger"] == "broker"
    assert event["ts"].endswith("Z") and isinstance(event["pid"], int)
    failed = json.loads(JsonLines().format(record("failed", exc=True)))
    assert "ValueError: boom" in failed["exc"] and "\n" not in JsonLines().format(record("failed", exc=True))


def test_the_format_comes_from_the_flag_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETSPARK_LOG_FORMAT", "json")
    assert log_format(None) == "json" and log_format("text") == "text"
    with pytest.raises(ValueError, match="not one of text, json"):
        log_format("xml")
