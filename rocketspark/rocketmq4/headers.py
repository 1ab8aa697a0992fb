"""Header fields of RocketMQ clients' requests: every value arrives as text (ali-ons writes
numbers and booleans, which the frame reader turns into text as fastjson would), and a missing
or malformed field is a malformed request naming the field.

SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE carry the send header with one-letter names
(``SendMessageRequestHeaderV2``); ``send_fields`` gives them their long names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rocketspark.errors import MalformedRequestError

V2_NAMES: Final = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}


def send_fields(ext: Mapping[str, Any], short: bool) -> dict[str, Any]:
    """A send header by its long names, whichever form it came in."""
    if not short:
        return dict(ext)
    return {V2_NAMES.get(k, k): v for k, v in ext.items()}


class Fields:
    """A request's header fields, read with the request's name in every error."""

    def __init__(self, what: str, ext: Mapping[str, Any]) -> None:
        self.what = what
        self.ext = ext

    def text(self, name: str, default: str | None = None) -> str:
        value = self.ext.get(name)
        if value is None or value == "":
            if default is None:
                raise MalformedRequestError(f'{self.what} needs the "{name}" header field')
            return default
        return str(value)

    def integer(self, name: str, default: int | None = None) -> int:
        value = self.ext.get(name)
        if value is None or value == "":
            if default is None:
                raise MalformedRequestError(f'{self.what} needs the integer "{name}" header field')
            return default
        try:
            return int(str(value))
        except ValueError:
            raise MalformedRequestError(f'{self.what}: header field "{name}" is {value!r}, not an integer') from None

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.ext.get(name)
        if value is None or value == "":
            return default
        text = str(value).lower()
        if text not in ("true", "false"):
            raise MalformedRequestError(f'{self.what}: header field "{name}" is {value!r}, not true or false')
        return text == "true"
