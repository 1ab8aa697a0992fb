// Messages (/messages): find them by topic and time range (newest first, a page at a time,
// "older" following the API's cursor), by key, or by id. Every search is a URL:
// /messages?topic=T&start=S&end=E[&cursor=C] and /messages?topic=T&key=K. Needs a sign-in.
import { api, el, form, link, messageLink, navigate, note, section, session, signInFirst, table, topicLink, when } from "./dom.js";

function searchForms(query) {
  const byTime = form("by-time", [
    { name: "topic", placeholder: "topic", required: true, value: query.get("key") ? "" : query.get("topic") },
    { name: "start", placeholder: "from (UTC, e.g. 2026-11-26T08:00:00, or ms)", size: 34, value: query.get("start") },
    { name: "end", placeholder: "to (UTC or ms; empty: now)", size: 26, value: query.get("end") },
  ], "Find by time", (v) => navigate(`/messages?${new URLSearchParams(Object.entries(v).filter(([, x]) => x))}`));
  const byKey = form("by-key", [
    { name: "topic", placeholder: "topic", required: true, value: query.get("key") ? query.get("topic") : "" },
    { name: "key", placeholder: "key", required: true, value: query.get("key") },
  ], "Find by key", (v) => navigate(`/messages?${new URLSearchParams(v)}`));
  const byId = form("by-id", [{ name: "id", placeholder: "message id or offset message id", size: 40, required: true }],
    "Find by id", (v) => navigate(`/messages/${encodeURIComponent(v.id.trim())}`));
  return section("Find messages", byTime, el("br"), byKey, el("br"), byId);
}

function rows(messages) {
  return messages.map((m) => [when(m.storeMs), messageLink(m.msgId), m.queueId ?? "?", m.queueOffset, m.broker,
    m.tag ?? "-", m.keys.join(" ") || "-", m.bodyBytes, el("span", m.snippet, "snippet")]);
}

function olderLink(query, cursor) {
  const next = new URLSearchParams(query);
  next.set("cursor", cursor);
  return link(`/messages?${next}`, "older →", "older");
}

export async function renderMessages(page) {
  const query = page.query;
  if (!session.admin) { signInFirst(page.main, "Messages"); return; }
  page.main.append(searchForms(query));
  const topic = query.get("topic");
  if (!topic) { page.main.append(note("Give a topic (and a time range, or a key), or an id.")); return; }
  const params = new URLSearchParams();
  for (const name of ["topic", "key", "start", "end", "cursor", "limit"]) if (query.get(name)) params.set(name, query.get(name));
  const answer = await api(`messages?${params}`);
  const title = el("h2");
  title.append("Messages of ", topicLink(topic), query.get("key") ? ` with key ${query.get("key")}` : ", newest first");
  const box = el("section");
  box.append(title);
  if (!answer.messages.length) box.append(note(query.get("cursor") ? "no older messages" : "no message found"));
  else box.append(table("messages", ["stored", "msg id", "queue", "offset", "broker", "tag", "keys", "bytes", "body"], rows(answer.messages)));
  if (answer.cursor) box.append(olderLink(query, answer.cursor));
  page.main.append(box);
}
