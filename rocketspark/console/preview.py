"""A message body as the console's message page shows it: JSON pretty-printed, other UTF-8
text as it is, anything else as a hex dump; never more than a page's worth (a body is up to
4 MiB, the page shows the start and says how much there is)."""

from __future__ import annotations

import json
from typing import Any

TEXT_SHOWN = 4000  # characters of text or JSON shown
HEX_SHOWN = 512  # bytes of a binary body dumped
HEX_ROW = 16


def preview(body: bytes) -> dict[str, Any]:
    """``{"kind": "json"|"text"|"binary"|"empty", "text": ..., "bytes": n, "truncated": bool}``."""
    if not body:
        return {"kind": "empty", "text": "", "bytes": 0, "truncated": False}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return _shown("binary", hex_dump(body[:HEX_SHOWN]), len(body), len(body) > HEX_SHOWN)
    if not _printable(text):
        return _shown("binary", hex_dump(body[:HEX_SHOWN]), len(body), len(body) > HEX_SHOWN)
    if text.lstrip()[:1] in ("{", "["):
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass  # looked like JSON, is not: shown as text
        else:
            return _shown("json", pretty[:TEXT_SHOWN], len(body), len(pretty) > TEXT_SHOWN)
    return _shown("text", text[:TEXT_SHOWN], len(body), len(text) > TEXT_SHOWN)


def _shown(kind: str, text: str, size: int, truncated: bool) -> dict[str, Any]:
    return {"kind": kind, "text": text, "bytes": size, "truncated": truncated}


def _printable(text: str) -> bool:
    """Text a person can read: control characters other than tab and line ends mean binary."""
    return all(ch.isprintable() or ch in "\t\r\n" for ch in text[:TEXT_SHOWN])


def hex_dump(data: bytes) -> str:
    """``hexdump -C``'s layout: offset, 16 bytes in hex, the printable ones as ASCII."""
    lines = []
    for at in range(0, len(data), HEX_ROW):
        row = data[at : at + HEX_ROW]
        hexes = " ".join(f"{b:02x}" for b in row)
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{at:08x}  {hexes:<{HEX_ROW * 3 - 1}}  |{ascii_}|")
    return "\n".join(lines)
