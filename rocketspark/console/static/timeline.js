// A static topic's logical queues drawn as segment timelines (RIP-21's picture): one row per
// queue, its segments in order, as wide as their messages (a sealed empty segment and the gap a
// remap leaves are drawn narrow), coloured by broker. A label that does not fit its segment is
// left out of it: the segment's tooltip (its <title>) and the legend say the same.
import { colorOf, svg } from "./dom.js";

const ROW = 22, LABEL = 70, WIDTH = 900, CHAR = 6.3, MIN = 24;

function labelFor(segment, width) {
  for (const text of [`${segment.broker} · gen ${segment.gen}`, `gen ${segment.gen}`]) {
    if (text.length * CHAR + 8 <= width) return text;
  }
  return null;
}

export function drawTimeline(topic) {
  const box = svg("svg", { class: "timeline", viewBox: `0 0 ${WIDTH} ${topic.queues.length * ROW + 4}`, "data-topic": topic.name });
  topic.queues.forEach((queue, row) => {
    const y = row * ROW + 2;
    box.append(svg("text", { x: 0, y: y + 15, class: "queue-label" }, `queue ${queue.queueId}`));
    const weights = queue.segments.map((s) => Math.max(1, s.messages));
    const total = weights.reduce((a, b) => a + b, 0);
    // each segment at least MIN wide, the rest shared by messages: the row never overflows
    const spare = WIDTH - LABEL - 12 * Math.max(0, queue.segments.length - 1) - MIN * queue.segments.length;
    let x = LABEL;
    queue.segments.forEach((segment, i) => {
      const w = MIN + (weights[i] / total) * spare;
      const rect = svg("rect", {
        x, y, width: w, height: ROW - 4, rx: 3, fill: colorOf(segment.broker), class: "segment",
        "data-broker": segment.broker, "data-gen": segment.gen, "data-queue": queue.queueId, "data-state": segment.state,
      });
      const end = segment.logicalEnd === null ? "open" : segment.logicalEnd;
      rect.append(svg("title", {}, `${segment.broker} gen ${segment.gen} [${segment.logicalStart}, ${end}) ${segment.state}, ${segment.messages} messages`));
      box.append(rect);
      const label = labelFor(segment, w);
      if (label) box.append(svg("text", { x: x + 4, y: y + 13, class: "segment-label" }, label));
      x += w;
      if (i < queue.segments.length - 1) {
        box.append(svg("line", { x1: x + 2, y1: y + 9, x2: x + 10, y2: y + 9, class: "gap" }));
        x += 12;
      }
    });
  });
  return box;
}
