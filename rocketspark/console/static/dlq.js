// DLQ and retry (/dlq): every %DLQ% and %RETRY% topic with its group and message count; browse
// one on the messages page, and resend a message from its page.
import { api, browseLink, groupLink, note, section, table, topicLink } from "./dom.js";

export async function renderDlq(page) {
  const topics = await api("dlq");
  page.main.append(section("DLQ and retry topics", topics.length
    ? table("dlq", ["topic", "kind", "group", "messages", ""], topics.map((t) => [topicLink(t.topic), t.kind, groupLink(t.group), t.messages, browseLink(t.topic)]))
    : note("no retry or DLQ topic: no message was sent back or dead-lettered"),
  note("Open a message to resend it to its group.")));
}
