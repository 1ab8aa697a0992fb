// The rocketspark console: one page whose script draws what the URL names. Pages are modules
// (overview, topics, messages, message, groups, producers, dlq); links are real <a href>s,
// followed here with history.pushState so the page is not loaded again.
import { change, session, showStatus } from "./dom.js";
import { renderDlq } from "./dlq.js";
import { renderGroup, renderGroups } from "./groups.js";
import { renderMessage } from "./message.js";
import { renderMessages } from "./messages.js";
import { renderOverview } from "./overview.js";
import { renderProducers } from "./producers.js";
import { renderTopic, renderTopics } from "./topics.js";

const PAGES = [
  [/^\/(?:index\.html)?$/, "overview", renderOverview],
  [/^\/topics\/?$/, "topics", renderTopics],
  [/^\/topics\/([^/]+)$/, "topic", renderTopic],
  [/^\/messages\/?$/, "messages", renderMessages],
  [/^\/messages\/([^/]+)$/, "message", renderMessage],
  [/^\/groups\/?$/, "groups", renderGroups],
  [/^\/groups\/([^/]+)$/, "group", renderGroup],
  [/^\/producers\/?$/, "producers", renderProducers],
  [/^\/dlq\/?$/, "dlq", renderDlq],
];

let shown = 0;  // which showing is current: a page left behind stops refreshing
const timers = [];

function pageFor(path) {
  for (const [pattern, name, render] of PAGES) {
    const match = pattern.exec(path);
    if (match) return { name, render, args: match.slice(1).map(decodeURIComponent) };
  }
  return null;
}

function markNav(path) {
  for (const a of document.querySelectorAll("#nav a")) {
    const target = a.getAttribute("href");
    a.classList.toggle("active", target === "/" ? path === "/" : path.startsWith(target));
  }
}

async function show() {
  const mine = ++shown;
  while (timers.length) clearTimeout(timers.pop());
  const main = document.getElementById("page");
  main.replaceChildren();
  showStatus("");
  document.body.dataset.loaded = "false";
  markNav(location.pathname);
  const page = pageFor(location.pathname);
  if (!page) { showStatus(`no page ${location.pathname}`, true); return; }
  document.body.dataset.page = page.name;
  const ctx = {
    main,
    query: new URLSearchParams(location.search),
    current: () => mine === shown,
    // run action every ms while this page is shown, each run after the previous one is done
    every(action, ms) {
      const tick = async () => {
        if (mine !== shown) return;
        try { await action(); } catch (error) { showStatus(error.message, true); }
        if (mine === shown) timers.push(setTimeout(tick, ms));
      };
      timers.push(setTimeout(tick, ms));
    },
  };
  try {
    await page.render(ctx, ...page.args);
    if (mine === shown) document.body.dataset.loaded = "true";
  } catch (error) {
    if (mine === shown) { showStatus(error.message, true); document.body.dataset.loaded = "error"; }
  }
}

function followLinks(event) {
  const a = event.target.closest("a");
  if (!a || a.target || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/api/") || !pageFor(url.pathname)) return;
  event.preventDefault();
  history.pushState(null, "", url.pathname + url.search);
  show();
}

async function readSession() {
  const answer = await fetch("/api/session").then((r) => r.json());
  session.admin = answer.admin;
  session.user = answer.user;
  document.getElementById("who").textContent = session.admin ? `signed in as ${session.user}` : "read-only";
  document.getElementById("sign-in").classList.toggle("hidden", session.admin);
  document.getElementById("sign-out").classList.toggle("hidden", !session.admin);
}

function wire() {
  document.addEventListener("click", followLinks);
  window.addEventListener("popstate", show);
  document.getElementById("sign-in").addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await change("session", "POST", { accessKey: document.getElementById("access-key").value, secret: document.getElementById("secret").value });
      document.getElementById("secret").value = "";
      await readSession();
      await show();
    } catch (error) { showStatus(error.message, true); }
  });
  document.getElementById("sign-out").addEventListener("click", async () => {
    await change("session", "DELETE");
    await readSession();
    await show();
  });
}

wire();
readSession().then(show, (error) => showStatus(`cannot reach the console: ${error.message}`, true));
