// Topics (/topics): the list, creating one (signed in); a topic (/topics/<name>): its queues'
// offsets and brokers, segments for a static topic, route, config, consuming groups, rates.
import {
  api, browseLink, change, colorOf, el, form, groupLink, legend, note, section, session, showStatus, table, topicLink, when,
} from "./dom.js";
import { drawTimeline } from "./timeline.js";

export async function renderTopics(page) {
  const list = el("div");
  const parts = [];
  if (session.admin) {
    parts.push(form("create-topic", [{ name: "name", placeholder: "topic", required: true }, { name: "queues", type: "number", value: 8 }], "Create topic", async (v) => {
      try {
        const result = await change("topics", "POST", { name: v.name, queues: Number(v.queues) });
        showStatus(`topic ${v.name} created on ${result.created.join(", ")}`);
        await draw();
      } catch (error) { showStatus(error.message, true); }
    }));
  }
  const draw = async () => {
    const topics = await api("topics");
    list.replaceChildren(table("topics", ["topic", "kind", "queues", "brokers", "messages"],
      topics.map((t) => [topicLink(t.name), t.kind, t.queues, t.brokers.join(", "), browseLink(t.name)])));
  };
  page.main.append(section("Topics", ...parts, list));
  await draw();
}

function rates(view) {
  if (!view.rates) return "in/out: sampling (the rates show once the cluster page's chart or this page has been open a few seconds)";
  return `in ${view.rates.in.toFixed(1)} msg/s, out ${view.rates.out.toFixed(1)} msg/s`;
}

function drawTopic(box, view) {
  const head = el("p");
  head.append(`${view.static ? "static" : "normal"} topic, ${view.queues.length} queues. `, el("span", rates(view), "rates"), " ", browseLink(view.name, "browse its messages"));
  const queues = table("queues", ["queue", "broker", "min offset", "max offset", "messages", "last stored"],
    view.queues.map((q) => [q.queueId, q.broker, q.minOffset, q.maxOffset, q.messages, when(q.lastStoreMs)]));
  const parts = [section(`Topic ${view.name}`, head), section("Queues", queues)];
  if (view.static) {
    const brokers = [...new Set(view.queues.flatMap((q) => q.segments.map((s) => s.broker)))].sort();
    brokers.forEach(colorOf);
    parts.push(section("Segments: logical queues across brokers", legend(brokers), drawTimeline(view)));
  }
  parts.push(section("Route", table("route", ["broker", "cluster", "address", "replicas", "read queues", "write queues", "perm"],
    view.route.map((r) => [r.broker, r.cluster, r.address || "(no master)", r.replicas.join(", ") || "-", r.readQueues, r.writeQueues, r.perm]))));
  parts.push(section("Config", table("config", ["broker", "read queues", "write queues", "perm", "traced"],
    Object.entries(view.config).map(([broker, c]) => [broker, c.readQueues, c.writeQueues, c.perm, c.trace ? "yes" : "no"]))));
  const groups = view.groups.length
    ? table("topic-groups", ["group", "members", "lag"], view.groups.map((g) => [groupLink(g.group), g.members, g.lag]))
    : note("no group has consumed it yet");
  parts.push(section("Groups consuming it", groups));
  box.replaceChildren(...parts);
}

export async function renderTopic(page, name) {
  const box = el("div");
  page.main.append(box);
  drawTopic(box, await api(`topics/${encodeURIComponent(name)}`));
  page.every(async () => drawTopic(box, await api(`topics/${encodeURIComponent(name)}`)), 5000);
}
