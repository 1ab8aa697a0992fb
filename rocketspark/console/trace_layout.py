"""A message's trace as the console draws it: its events on one time axis, in lanes (the
producer's side, then one lane per consumer group), with each event's place from 0 to 1 and
a few labelled ticks. Computed here, not in the page, so it is tested without a browser."""

from __future__ import annotations

from typing import Any

from rocketspark.protocol.trace import TraceEvent

PRODUCER_LANE = "sent and stored"


def lane_of(event: TraceEvent) -> str:
    """Sends and stores are the producer's lane; the rest, the consumer group's."""
    if event.event in ("sent", "stored") or not event.group:
        return PRODUCER_LANE
    return f"group {event.group}"


def timeline(events: list[TraceEvent], ticks: int = 5) -> dict[str, Any]:
    """``{"startMs", "endMs", "lanes": [...], "events": [{..., "lane", "at"}], "ticks": [...]}``;
    ``at`` is the event's place on the axis (0 the first event, 1 the last); an empty trace
    gives no events (the page says tracing is off for the topic)."""
    if not events:
        return {"startMs": None, "endMs": None, "lanes": [], "events": [], "ticks": []}
    ordered = sorted(events, key=lambda e: e.time_ms)
    start, end = ordered[0].time_ms, ordered[-1].time_ms
    span = max(1, end - start)
    lanes: list[str] = [PRODUCER_LANE]
    rows = []
    for e in ordered:
        lane = lane_of(e)
        if lane not in lanes:
            lanes.append(lane)
        rows.append({**e.to_json(), "lane": lanes.index(lane), "at": (e.time_ms - start) / span})
    marks = [{"at": i / ticks, "timeMs": start + round(span * i / ticks)} for i in range(ticks + 1)]
    return {"startMs": start, "endMs": end, "lanes": lanes, "events": rows, "ticks": marks}
