// The rocketspark console: polls the JSON API and draws the cluster. No framework, no CDN:
// every element is built with the DOM API and every text set with textContent.
"use strict";

const COLORS = ["#2f6fde", "#e07b39", "#2ca58d", "#b54fc2", "#d64550", "#7a8b2f", "#3aa6c9", "#8d6e63"];
const brokerColors = new Map();
let signedIn = false;

function colorOf(broker) {
  if (!brokerColors.has(broker)) brokerColors.set(broker, COLORS[brokerColors.size % COLORS.length]);
  return brokerColors.get(broker);
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function fillRows(tableId, rows) {
  const body = document.querySelector(`#${tableId} tbody`);
  body.replaceChildren(...rows.map((cells) => {
    const tr = el("tr");
    for (const cell of cells) {
      if (cell instanceof Node) { const td = el("td"); td.append(cell); tr.append(td); }
      else tr.append(el("td", cell, typeof cell === "number" ? "num" : ""));
    }
    return tr;
  }));
}

function showStatus(text, isError) {
  const box = document.getElementById("status");
  box.textContent = text;
  box.classList.toggle("hidden", !text);
  box.classList.toggle("error", Boolean(isError));
}

async function api(path, options) {
  const response = await fetch(`/api/${path}`, options);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

function change(path, method, payload) {
  return api(path, {
    method,
    headers: { "Content-Type": "application/json", "X-Console": "1" },
    body: payload === undefined ? undefined : JSON.stringify(payload),
  });
}

// -- the cluster ------------------------------------------------------------------------------

function metricsLink(url) {  // a server's /metrics, as it reports it (http or https only)
  if (!/^https?:\/\//.test(url || "")) return "-";
  const a = el("a", "metrics", "metrics-link");
  a.href = url;
  return a;
}

function drawOverview(view) {
  const names = document.getElementById("nameservers");
  names.replaceChildren("nameservers ");
  for (const ns of view.nameserverMetrics) names.append(`${ns.address} `, metricsLink(ns.metricsUrl), " ");
  const rows = [];
  for (const cluster of view.clusters) {
    for (const b of cluster.brokers) {
      rows.push([cluster.name, b.name, b.address, b.perm, b.topics, `${b.heartbeatAgoMs} ms ago`, metricsLink(b.metricsUrl)]);
    }
  }
  fillRows("brokers", rows);
  const replicaRows = [];
  for (const group of view.replicaGroups) {
    for (const r of group.replicas) {
      replicaRows.push([group.name, r.alive ? r.role : `${r.role} (silent)`, r.address, r.replica_id, group.epoch,
        r.offset < 0 ? "-" : r.offset, r.lag === null ? "-" : r.lag, r.in_sync ? "yes" : "no"]);
    }
  }
  fillRows("replicas", replicaRows);
  document.getElementById("replica-section").classList.toggle("hidden", replicaRows.length === 0);
}

// -- throughput -------------------------------------------------------------------------------

function drawChart(samples) {
  const chart = document.getElementById("chart");
  const width = 900, height = 180, pad = 24;
  const top = Math.max(10, ...samples.map((s) => s.total));
  const children = [svg("line", { x1: pad, y1: height - pad, x2: width, y2: height - pad, stroke: "#dfe3ea" })];
  children.push(Object.assign(svg("text", { x: 4, y: 14, fill: "#6b7385", "font-size": 11 }), { textContent: `${Math.round(top)} msg/s` }));
  if (samples.length > 1) {
    const t0 = samples[0].t, span = Math.max(1, samples[samples.length - 1].t - t0);
    const points = samples.map((s) => {
      const x = pad + ((s.t - t0) / span) * (width - pad);
      const y = height - pad - (s.total / top) * (height - 2 * pad);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    children.push(svg("polyline", { points: points.join(" "), fill: "none", stroke: "#2f6fde", "stroke-width": 2, class: "throughput" }));
  }
  chart.replaceChildren(...children);
  const last = samples[samples.length - 1];
  document.getElementById("rate").textContent = last ? `${Math.round(last.total).toLocaleString()} msg/s now` : "(sampling)";
}

// -- topics and their segments ----------------------------------------------------------------

function drawTopics(topics) {
  fillRows("topics", topics.map((t) => [t.name, t.kind, t.queues, t.brokers.join(", ")]));
}

function drawTimeline(topic) {
  // One row per logical queue: its segments in order, as wide as their messages (a sealed empty
  // segment and the gap a remap leaves are drawn narrow), coloured by broker.
  const rowHeight = 22, labelWidth = 70, width = 900;
  const box = svg("svg", { class: "timeline", viewBox: `0 0 ${width} ${topic.queues.length * rowHeight + 4}`, "data-topic": topic.name });
  topic.queues.forEach((queue, row) => {
    const y = row * rowHeight + 2;
    box.append(Object.assign(svg("text", { x: 0, y: y + 15, class: "queue-label" }), { textContent: `queue ${queue.queueId}` }));
    const weights = queue.segments.map((s) => Math.max(1, s.messages));
    const total = weights.reduce((a, b) => a + b, 0);
    const usable = width - labelWidth - 12 * Math.max(0, queue.segments.length - 1);
    let x = labelWidth;
    queue.segments.forEach((segment, i) => {
      const w = Math.max(36, (weights[i] / total) * usable);
      const rect = svg("rect", {
        x, y, width: w, height: rowHeight - 4, rx: 3, fill: colorOf(segment.broker), class: "segment",
        "data-broker": segment.broker, "data-gen": segment.gen, "data-queue": queue.queueId, "data-state": segment.state,
      });
      const end = segment.logicalEnd === null ? "open" : segment.logicalEnd;
      rect.append(Object.assign(svg("title"), { textContent: `${segment.broker} gen ${segment.gen} [${segment.logicalStart}, ${end}) ${segment.state}, ${segment.messages} messages` }));
      box.append(rect);
      box.append(Object.assign(svg("text", { x: x + 4, y: y + 13, class: "segment-label" }), { textContent: `${segment.broker} · gen ${segment.gen}` }));
      x += w;
      if (i < queue.segments.length - 1) {
        box.append(svg("line", { x1: x + 2, y1: y + 9, x2: x + 10, y2: y + 9, class: "gap" }));
        x += 12;
      }
    });
  });
  return box;
}

async function drawStatics(topics) {
  const statics = topics.filter((t) => t.kind === "static");
  const views = await Promise.all(statics.map((t) => api(`topics/${encodeURIComponent(t.name)}`)));
  const parts = [];
  for (const view of views) {
    parts.push(el("div", view.name, "timeline-title"));
    parts.push(drawTimeline(view));
  }
  if (!parts.length) parts.push(el("p", "no static topic yet", "muted"));
  document.getElementById("timelines").replaceChildren(...parts);
  document.getElementById("legend").replaceChildren(...[...brokerColors.entries()].map(([broker, color]) => {
    const item = el("span", null);
    const swatch = el("span", null, "swatch");
    swatch.style.background = color;
    item.append(swatch, document.createTextNode(broker));
    return item;
  }));
}

// -- groups -----------------------------------------------------------------------------------

function resetButtons(group) {
  const box = el("span", null, "inline");
  for (const topic of group.topics) {
    for (const to of ["earliest", "latest"]) {
      const button = el("button", `${topic} → ${to}`, "small");
      button.type = "button";
      button.addEventListener("click", async () => {
        try {
          await change(`groups/${encodeURIComponent(group.group)}/reset`, "POST", { topic, to });
          showStatus(`group ${group.group}: ${topic} reset to ${to}; its consumers follow at their next heartbeat`);
        } catch (error) { showStatus(error.message, true); }
      });
      box.append(button);
    }
  }
  return box;
}

function drawGroups(groups) {
  fillRows("groups", groups.map((g) => {
    const row = [g.group, g.topics.join(", ") || "-", g.members.length ? `${g.members.length}: ${g.members.join(", ")}` : "0", g.lag];
    if (signedIn) row.push(resetButtons(g));
    return row;
  }));
}

// -- a message by id --------------------------------------------------------------------------

function drawMessage(m) {
  const when = (ms) => new Date(ms).toISOString();
  const props = Object.entries(m.properties).map(([k, v]) => `${k}=${v}`).join(", ");
  const body = m.body.length < m.bodyBytes ? `${m.body} … (${m.bodyBytes} bytes)` : m.body;
  fillRows("message", [
    ["msg id", m.msgId], ["offset msg id", m.offsetMsgId], ["topic", m.topic],
    ["queue", `${m.queueId ?? "?"} at offset ${m.queueOffset} on ${m.broker}`], ["tag", m.tag ?? "-"],
    ["keys", m.keys.join(" ") || "-"], ["properties", props || "-"],
    ["born", when(m.bornMs)], ["stored", when(m.storeMs)], ["body", body],
  ]);
  document.getElementById("message").classList.remove("hidden");
}

// -- session ----------------------------------------------------------------------------------

function drawSession(session) {
  signedIn = session.admin;
  document.getElementById("who").textContent = signedIn ? `signed in as ${session.user}` : "read-only";
  document.getElementById("sign-in").classList.toggle("hidden", signedIn);
  document.getElementById("sign-out").classList.toggle("hidden", !signedIn);
  for (const node of document.querySelectorAll(".admin-only")) node.classList.toggle("hidden", !signedIn);
}

async function refresh() {
  try {
    const [overview, topics, groups, session] = await Promise.all([api("overview"), api("topics"), api("groups"), api("session")]);
    drawSession(session);
    drawOverview(overview);
    drawTopics(topics);
    drawGroups(groups);
    await drawStatics(topics);
    document.body.dataset.loaded = "true";
    if (document.getElementById("status").classList.contains("error")) showStatus("");
  } catch (error) {
    showStatus(`cannot reach the cluster: ${error.message}`, true);
  }
}

async function refreshChart() {
  try { drawChart(await api("throughput")); } catch (error) { showStatus(error.message, true); }
}

function wire() {
  document.getElementById("sign-in").addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await change("session", "POST", { accessKey: document.getElementById("access-key").value, secret: document.getElementById("secret").value });
      document.getElementById("secret").value = "";
      showStatus("");
      await refresh();
    } catch (error) { showStatus(error.message, true); }
  });
  document.getElementById("sign-out").addEventListener("click", async () => { await change("session", "DELETE"); await refresh(); });
  document.getElementById("find-message").addEventListener("submit", async (event) => {
    event.preventDefault();
    const id = document.getElementById("message-id").value.trim();
    try {
      drawMessage(await api(`messages/${encodeURIComponent(id)}`));
      showStatus("");
    } catch (error) {
      document.getElementById("message").classList.add("hidden");
      showStatus(error.message, true);
    }
  });
  document.getElementById("create-topic").addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = document.getElementById("new-topic").value;
    try {
      const result = await change("topics", "POST", { name, queues: Number(document.getElementById("new-queues").value) });
      showStatus(`topic ${name} created on ${result.created.join(", ")}`);
      await refresh();
    } catch (error) { showStatus(error.message, true); }
  });
}

// Each poll starts when the previous one is done: a slow cluster never piles requests up.
async function every(action, ms) {
  await action();
  setTimeout(() => every(action, ms), ms);
}

wire();
every(refresh, 5000);
every(refreshChart, 2000);
