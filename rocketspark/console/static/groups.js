// Consumer groups (/groups) and one group (/groups/<name>): its members (client, address,
// language, version, protocol, subscriptions), its lag per queue on each topic, resetting its
// offsets (signed in), and its retry and DLQ topics with links to browse them.
import { api, browseLink, change, el, groupLink, note, section, session, showStatus, table, topicLink, when } from "./dom.js";

export async function renderGroups(page) {
  const box = el("div");
  page.main.append(box);
  const draw = async () => {
    const groups = await api("groups");
    box.replaceChildren(section("Consumer groups", groups.length
      ? table("groups", ["group", "topics", "members", "lag"], groups.map((g) => [groupLink(g.group), g.topics.join(", ") || "-", g.members.length, g.lag]))
      : note("no consumer group yet")));
  };
  await draw();
  page.every(draw, 5000);
}

function subscriptions(member) {
  return member.subscriptions.map((s) => `${s.topic}: ${s.expressionType} ${s.expression}`).join("; ") || "-";
}

function resetButtons(group, topic) {
  const box = el("span", null, "inline");
  for (const to of ["earliest", "latest"]) {
    const button = el("button", `reset to ${to}`, "small");
    button.type = "button";
    button.dataset.reset = `${topic}:${to}`;
    button.addEventListener("click", async () => {
      try {
        await change(`groups/${encodeURIComponent(group)}/reset`, "POST", { topic, to });
        showStatus(`group ${group}: ${topic} reset to ${to}; its consumers follow at their next heartbeat`);
      } catch (error) { showStatus(error.message, true); }
    });
    box.append(button);
  }
  return box;
}

function progress(view) {
  if (!view.progress.length) return [section("Lag", note("no progress committed and no subscription yet"))];
  return view.progress.map((p) => {
    const title = el("h2");
    title.append("Lag on ", topicLink(p.topic), ` : ${p.lag.toLocaleString()} messages `);
    const box = el("section");
    box.append(title);
    if (session.admin) box.append(resetButtons(view.group, p.topic));
    box.append(table(`lag-${p.topic}`, ["queue", "broker", "broker offset", "consumer offset", "lag"],
      p.queues.map((q) => [q.queueId, q.broker, q.brokerOffset, q.consumerOffset < 0 ? "none committed" : q.consumerOffset, q.lag])));
    return box;
  });
}

function drawGroup(box, view) {
  const members = view.members.length
    ? table("members", ["client id", "address", "language", "version", "protocol", "subscriptions", "last seen"],
      view.members.map((m) => [m.clientId, m.address, m.language, m.version, m.protocol, subscriptions(m), when(m.lastSeenMs)]))
    : note("no member connected");
  const special = view.groupTopics.length
    ? table("group-topics", ["topic", "kind", "messages", ""], view.groupTopics.map((t) => [topicLink(t.topic), t.kind, t.messages, browseLink(t.topic)]))
    : note("no retry or DLQ topic: nothing was sent back or dead-lettered");
  box.replaceChildren(section(`Group ${view.group}`, el("h3", "Members"), members), ...progress(view), section("Retry and DLQ topics", special));
}

export async function renderGroup(page, name) {
  const box = el("div");
  page.main.append(box);
  drawGroup(box, await api(`groups/${encodeURIComponent(name)}`));
  page.every(async () => drawGroup(box, await api(`groups/${encodeURIComponent(name)}`)), 5000);
}
