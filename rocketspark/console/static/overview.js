// The cluster overview (/): brokers with their /metrics, replica groups, the throughput chart.
import { drawChart } from "./chart.js";
import { api, el, metricsLink, note, section, table } from "./dom.js";

function brokerRows(view) {
  const rows = [];
  for (const cluster of view.clusters) {
    for (const b of cluster.brokers) {
      rows.push([cluster.name, b.name, b.address, b.perm, b.topics, `${b.heartbeatAgoMs} ms ago`, metricsLink(b.metricsUrl)]);
    }
  }
  return rows;
}

function replicaRows(view) {
  const rows = [];
  for (const group of view.replicaGroups) {
    for (const r of group.replicas) {
      rows.push([group.name, r.alive ? r.role : `${r.role} (silent)`, r.address, r.replica_id, group.epoch,
        r.offset < 0 ? "-" : r.offset, r.lag === null ? "-" : r.lag, r.in_sync ? "yes" : "no"]);
    }
  }
  return rows;
}

function drawCluster(box, view) {
  const names = el("p", null, "muted");
  names.id = "nameservers";
  names.append("nameservers: ");
  for (const ns of view.nameserverMetrics) names.append(`${ns.address} `, metricsLink(ns.metricsUrl), "  ");
  const parts = [
    section("Clusters", names, table("brokers", ["cluster", "broker", "address", "perm", "topics", "last heartbeat", "metrics"], brokerRows(view))),
  ];
  const replicas = replicaRows(view);
  if (replicas.length) {
    parts.push(section("Replica groups", table("replicas", ["group", "role", "address", "replica id", "epoch", "offset", "lag (bytes)", "in SyncStateSet"], replicas)));
  }
  box.replaceChildren(...parts);
}

function drawThroughput(box, samples) {
  const { chart, legend } = drawChart(samples);
  const last = samples[samples.length - 1];
  const title = el("h2", "Throughput: messages in per second ");
  title.append(el("span", last ? `${Math.round(last.total).toLocaleString()} msg/s now` : "(sampling)", "muted"));
  box.replaceChildren(title, chart, legend, note("Times in UTC. Per-topic lines: the busiest topics' messages in; each server's /metrics is linked above."));
}

export async function renderOverview(page) {
  const cluster = el("div");
  const throughput = el("section");
  page.main.append(cluster, throughput);
  const [view, samples] = await Promise.all([api("overview"), api("throughput")]);
  drawCluster(cluster, view);
  drawThroughput(throughput, samples);
  page.every(async () => drawCluster(cluster, await api("overview")), 5000);
  page.every(async () => drawThroughput(throughput, await api("throughput")), 2000);
}
