// What every page shares: building elements (every text set with textContent), the JSON API,
// the status line and how times are written (UTC, as the CLI prints them).

export const session = { admin: false, user: null };

export function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

export function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

// A link to a page of the console: a real <a href>, followed in the page (see app.js).
export function link(href, text, cls) {
  const a = el("a", text, cls);
  a.href = href;
  return a;
}

export const topicLink = (name) => link(`/topics/${encodeURIComponent(name)}`, name);
export const groupLink = (name) => link(`/groups/${encodeURIComponent(name)}`, name);
export const messageLink = (id, text) => link(`/messages/${encodeURIComponent(id)}`, text ?? id);
export const browseLink = (topic, text) => link(`/messages?topic=${encodeURIComponent(topic)}`, text ?? "browse");

export function metricsLink(url) {  // a server's /metrics, as it reports it (http or https only)
  if (!/^https?:\/\//.test(url || "")) return "-";
  return link(url, "metrics", "metrics-link");
}

export function cell(value) {
  const td = el("td");
  if (value instanceof Node) td.append(value);
  else {
    td.textContent = value === null || value === undefined ? "-" : String(value);
    if (typeof value === "number") td.className = "num";
  }
  return td;
}

// A table: its head, and its rows of cells (text, numbers or nodes).
export function table(id, headers, rows) {
  const node = el("table");
  if (id) node.id = id;
  const head = el("tr");
  for (const h of headers) head.append(el("th", h));
  const thead = el("thead");
  thead.append(head);
  const body = el("tbody");
  for (const cells of rows) {
    const tr = el("tr");
    for (const value of cells) tr.append(cell(value));
    body.append(tr);
  }
  node.append(thead, body);
  return node;
}

export function section(title, ...children) {
  const box = el("section");
  box.append(el("h2", title), ...children);
  return box;
}

export function note(text) {
  return el("p", text, "muted");
}

export function showStatus(text, isError) {
  const box = document.getElementById("status");
  box.textContent = text || "";
  box.classList.toggle("hidden", !text);
  box.classList.toggle("error", Boolean(isError));
}

export async function api(path, options) {
  const response = await fetch(`/api/${path}`, options);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

export function change(path, method, payload) {
  return api(path, {
    method,
    headers: { "Content-Type": "application/json", "X-Console": "1" },
    body: payload === undefined ? undefined : JSON.stringify(payload),
  });
}

export function when(ms) {  // 2026-11-26 11:33:49.123 UTC
  if (!ms) return "-";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
}

export function clock(ms) {  // 11:33:49 (UTC), for axes
  return new Date(ms).toISOString().slice(11, 19);
}

export const COLORS = ["#2f6fde", "#e07b39", "#2ca58d", "#b54fc2", "#d64550", "#7a8b2f", "#3aa6c9", "#8d6e63"];

const colors = new Map();
export function colorOf(name) {
  if (!colors.has(name)) colors.set(name, COLORS[colors.size % COLORS.length]);
  return colors.get(name);
}

export function legend(names) {
  const box = el("div", null, "legend");
  for (const name of names) {
    const item = el("span");
    const swatch = el("span", null, "swatch");
    swatch.style.background = colorOf(name);
    item.append(swatch, document.createTextNode(name));
    box.append(item);
  }
  return box;
}

// Needs a sign-in: a message body is the cluster's data. Says so instead of asking the API.
export function signInFirst(main, what) {
  main.append(section(what, note("Sign in as the admin (top right) to look messages up: a body is the cluster's data.")));
}

// Go to a page of the console without loading it again (app.js draws it on popstate).
export function navigate(href) {
  history.pushState(null, "", href);
  window.dispatchEvent(new PopStateEvent("popstate"));
}

// A form of labelled inputs; onSubmit gets the values by name.
export function form(id, fields, button, onSubmit) {
  const node = el("form", null, "inline");
  node.id = id;
  for (const f of fields) {
    const input = el(f.options ? "select" : "input");
    input.name = f.name;
    if (f.options) for (const o of f.options) { const opt = el("option", o); opt.value = o; input.append(opt); }
    else { input.placeholder = f.placeholder || f.name; if (f.size) input.size = f.size; if (f.type) input.type = f.type; }
    if (f.value !== undefined && f.value !== null) input.value = f.value;
    if (f.required) input.required = true;
    node.append(input);
  }
  const submit = el("button", button);
  submit.type = "submit";
  node.append(submit);
  node.addEventListener("submit", (event) => {
    event.preventDefault();
    onSubmit(Object.fromEntries(new FormData(node).entries()));
  });
  return node;
}
