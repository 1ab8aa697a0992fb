// A message (/messages/<id>, either id): where it is, its properties, its body (text, JSON
// pretty-printed, or a hex dump), its trace as a timeline, and resending it to a group
// (signed-in admins). Needs a sign-in: a body is the cluster's data.
import {
  api, browseLink, change, el, form, note, section, session, showStatus, signInFirst, table, topicLink, when,
} from "./dom.js";
import { drawTrace } from "./trace.js";

function facts(m) {
  const rows = [
    ["msg id", m.msgId], ["offset msg id", m.offsetMsgId], ["topic", topicLink(m.topic)],
    ["queue", `${m.queueId ?? "?"} at offset ${m.queueOffset} on ${m.broker}`], ["tag", m.tag ?? "-"],
    ["keys", m.keys.join(" ") || "-"], ["born", when(m.bornMs)], ["stored", when(m.storeMs)], ["size", `${m.bodyBytes} bytes`],
  ];
  for (const [k, v] of Object.entries(m.properties)) rows.push([`property ${k}`, v]);
  return table("message", ["", ""], rows);
}

function body(preview) {
  const kinds = { json: "JSON, pretty-printed", text: "text", binary: "binary: hex dump", empty: "empty" };
  const more = preview.truncated ? ` (the start of ${preview.bytes} bytes)` : "";
  const pre = el("pre", preview.text, `body body-${preview.kind}`);
  pre.id = "body";
  return section(`Body: ${kinds[preview.kind] || preview.kind}${more}`, pre);
}

function trace(m) {
  if (!m.trace.events.length) {
    return section("Trace", note("tracing is off for this topic (create it with trace=True or --trace, or set the brokers' trace_enable); nothing was recorded"));
  }
  const rows = m.trace.events.map((e) => [when(e.timeMs), e.event, e.broker, e.group || "-", e.client || "-", e.costMs ?? "-", e.detail]);
  return section("Trace", drawTrace(m.trace), table("trace-events", ["time", "event", "broker", "group", "client", "cost ms", "detail"], rows));
}

function ownGroup(topic) {  // a retry or DLQ topic's group: where a resend goes back to
  const match = /^%(?:RETRY|DLQ)%(.+)$/.exec(topic);
  return match ? match[1] : null;
}

async function resend(m) {
  const all = await api("groups");
  const groups = all.map((g) => g.group);
  const own = ownGroup(m.topic);
  const consuming = all.filter((g) => g.topics.includes(m.topic))
    .sort((a, b) => b.members.length - a.members.length).map((g) => g.group);  // running groups first
  const first = own || consuming[0] || groups[0] || "";
  const options = [...new Set([first, ...consuming, ...groups].filter(Boolean))];
  const box = section("Resend to a group");
  if (!options.length) { box.append(note("no consumer group yet")); return box; }
  box.append(note("A copy goes to the group's retry topic (%RETRY%<group>): that group's consumers get it again, no other group does."));
  box.append(form("resend", [{ name: "group", options, value: first }], "Resend", async (v) => {
    try {
      const sent = await change(`messages/${encodeURIComponent(m.msgId)}/resend`, "POST", { group: v.group });
      showStatus(`resent to group ${sent.group}: ${sent.topic} message ${sent.msgId}`);
    } catch (error) { showStatus(error.message, true); }
  }));
  return box;
}

export async function renderMessage(page, id) {
  if (!session.admin) { signInFirst(page.main, "Message"); return; }
  const m = await api(`messages/${encodeURIComponent(id)}`);
  const head = el("p");
  head.append(browseLink(m.topic, `more messages of ${m.topic}`));
  page.main.append(section(`Message ${m.msgId}`, head, facts(m)), body(m.preview), trace(m), await resend(m));
}
