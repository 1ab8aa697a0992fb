// Producers (/producers): each producer group's connections (client, address, language,
// version, protocol, the brokers it is connected to).
import { api, note, section, table, when } from "./dom.js";

export async function renderProducers(page) {
  const groups = await api("producers");
  if (!groups.length) { page.main.append(section("Producers", note("no producer connected"))); return; }
  for (const g of groups) {
    page.main.append(section(`Producer group ${g.group}`, table(`producers-${g.group}`,
      ["client id", "address", "language", "version", "protocol", "brokers", "last seen"],
      g.connections.map((c) => [c.clientId, c.address, c.language, c.version, c.protocol, c.brokers.join(", "), when(c.lastSeenMs)]))));
  }
}
