// A message's trace drawn as a timeline: one lane for its send and store, one per consumer
// group; each event a dot at its time, with its name; ticks labelled with clock times (UTC).
// The layout (lanes, each event's place from 0 to 1, ticks) comes computed from the API.
import { clock, colorOf, svg } from "./dom.js";

const WIDTH = 900, LANE = 34, LEFT = 150, RIGHT = 40, AXIS = 26;

export function drawTrace(layout) {
  const height = layout.lanes.length * LANE + AXIS + 6;
  const box = svg("svg", { id: "trace", class: "trace", viewBox: `0 0 ${WIDTH} ${height}`, role: "img", "aria-label": "message trace" });
  const x = (at) => LEFT + at * (WIDTH - LEFT - RIGHT);
  layout.lanes.forEach((lane, i) => {
    const y = i * LANE + LANE / 2;
    box.append(svg("text", { x: 0, y: y + 4, class: "lane-label" }, lane));
    box.append(svg("line", { x1: LEFT, y1: y, x2: WIDTH - RIGHT, y2: y, class: "lane" }));
  });
  const axisY = layout.lanes.length * LANE + 4;
  for (const tick of layout.ticks) {
    box.append(svg("line", { x1: x(tick.at), y1: axisY, x2: x(tick.at), y2: axisY + 4, class: "tick" }));
    box.append(svg("text", { x: x(tick.at), y: axisY + 16, class: "axis-label", "text-anchor": "middle" }, `${clock(tick.timeMs)}.${String(tick.timeMs % 1000).padStart(3, "0")}`));
  }
  layout.events.forEach((e, i) => {
    const y = e.lane * LANE + LANE / 2;
    const dot = svg("circle", { cx: x(e.at), cy: y, r: 6, fill: colorOf(`event ${e.event}`), class: "trace-event", "data-event": e.event });
    const cost = e.costMs === null ? "" : `, ${e.costMs} ms`;
    dot.append(svg("title", {}, `${e.event} ${new Date(e.timeMs).toISOString()} on ${e.broker}${e.group ? ` to ${e.group}` : ""}${e.client ? ` (${e.client})` : ""}${cost}: ${e.detail}`));
    box.append(dot);
    const above = i % 2 === 0;  // alternate above and below: events close in time stay readable
    box.append(svg("text", { x: x(e.at), y: y + (above ? -9 : 17), class: "event-label", "text-anchor": "middle" }, e.event));
  });
  return box;
}
