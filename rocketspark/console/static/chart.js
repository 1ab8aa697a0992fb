// The throughput chart: messages in per second over the last minutes, the cluster's total and
// one line per topic, on a time axis labelled with clock times (UTC).
import { clock, colorOf, legend, svg } from "./dom.js";

const WIDTH = 900, HEIGHT = 200, LEFT = 56, RIGHT = 34, BOTTOM = 22, TOP = 8, TOPICS_DRAWN = 8;

function busiestTopics(samples) {
  const peak = new Map();
  for (const s of samples) {
    for (const [topic, rate] of Object.entries(s.topics || {})) peak.set(topic, Math.max(peak.get(topic) || 0, rate.in));
  }
  return [...peak.entries()].filter(([, p]) => p > 0).sort((a, b) => b[1] - a[1]).slice(0, TOPICS_DRAWN).map(([t]) => t);
}

function niceTop(value) {
  const step = 10 ** Math.floor(Math.log10(Math.max(value, 10)));
  return Math.ceil(value / step) * step;
}

export function drawChart(samples) {
  const chart = svg("svg", { id: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": "messages in per second" });
  const topics = busiestTopics(samples);
  const top = niceTop(Math.max(10, ...samples.map((s) => s.total)));
  const plotH = HEIGHT - TOP - BOTTOM;
  const y = (v) => TOP + plotH - (v / top) * plotH;
  for (const frac of [0, 0.5, 1]) {
    chart.append(svg("line", { x1: LEFT, y1: y(top * frac), x2: WIDTH, y2: y(top * frac), class: "grid" }));
    chart.append(svg("text", { x: LEFT - 6, y: y(top * frac) + 4, class: "axis-label", "text-anchor": "end" }, `${Math.round(top * frac).toLocaleString()}/s`));
  }
  if (samples.length < 2) {
    chart.append(svg("text", { x: LEFT + 10, y: TOP + plotH / 2, class: "axis-label" }, "sampling: the first rates show in a few seconds"));
    return { chart, legend: legend([]) };
  }
  const t0 = samples[0].t, t1 = samples[samples.length - 1].t, span = Math.max(1, t1 - t0);
  const x = (t) => LEFT + ((t - t0) / span) * (WIDTH - LEFT - RIGHT);
  const ticks = 6;
  let previous = "";
  for (let i = 0; i <= ticks; i++) {
    const t = t0 + (span * i) / ticks;
    chart.append(svg("line", { x1: x(t), y1: TOP + plotH, x2: x(t), y2: TOP + plotH + 4, class: "tick" }));
    if (clock(t) === previous) continue;  // a short chart: one label per second
    previous = clock(t);
    chart.append(svg("text", { x: x(t), y: HEIGHT - 6, class: "axis-label time-label", "text-anchor": "middle" }, previous));
  }
  const line = (value, cls, color, width, name) => {
    const points = samples.map((s) => `${x(s.t).toFixed(1)},${y(value(s)).toFixed(1)}`).join(" ");
    const poly = svg("polyline", { points, fill: "none", stroke: color, "stroke-width": width, class: cls, "data-name": name });
    poly.append(svg("title", {}, name));
    return poly;
  };
  for (const topic of topics) {
    chart.append(line((s) => (s.topics && s.topics[topic] ? s.topics[topic].in : 0), "topic-line", colorOf(`topic ${topic}`), 1.5, topic));
  }
  chart.append(line((s) => s.total, "throughput", "#1d2433", 2.5, "total"));
  const names = topics.map((t) => `topic ${t}`);
  const key = legend(["total", ...names]);
  key.firstChild.querySelector(".swatch").style.background = "#1d2433";
  return { chart, legend: key };
}
