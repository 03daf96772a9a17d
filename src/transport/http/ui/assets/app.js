// The status page: draws /ui/status.json, then follows /ui/events. Every text from the
// gateway goes in through textContent, never as markup.
"use strict";

const $ = (selector) => document.querySelector(selector);
const FEED_MAX = 200;

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) tr.append(cell instanceof Node ? cell : el("td", cell));
  return tr;
}

function num(value) {
  return el("td", value === undefined || value === null ? "" : value, "num");
}

function ms(value) {
  return value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : Math.round(value).toString();
}

function version(entry) {
  if (entry.server_info && entry.server_info.version) return entry.server_info.version;
  if (entry.digest) return "sha256:" + entry.digest.slice(0, 12);
  return "";
}

function drawBackends(backends) {
  const body = $("#backends tbody");
  body.replaceChildren();
  for (const [name, entry] of Object.entries(backends || {})) {
    const state = el("td");
    state.append(el("span", entry.status, "badge state-" + entry.status));
    const error = entry.reload_error || entry.last_error || "";
    const tr = row([el("td", name), entry.kind, state, el("td", version(entry)), num(entry.tool_count), num(entry.restarts), el("td", error, "error")]);
    tr.dataset.name = name;
    if (entry.digest) tr.dataset.digest = entry.digest;
    body.append(tr);
  }
}

function drawSessions(sessions) {
  const body = $("#sessions tbody");
  body.replaceChildren();
  if (!sessions.length) body.append(row([el("td", "no sessions", "muted"), "", ""]));
  // A client of a stdio gateway has no token: it is named by the name it gave.
  const who = (s) => s.token || (s.client ? `${s.client} (local)` : "(no token)");
  for (const s of sessions) body.append(row([who(s), s.profile || "(all)", num(s.count)]));
}

function drawMiddleware(chain) {
  const list = $("#middleware");
  list.replaceChildren();
  const links = Array.isArray(chain) ? chain : (chain && (chain.links || chain.chain)) || [];
  if (!links.length) list.append(el("li", "none configured", "muted"));
  for (const link of links) {
    const item = el("li", link.name);
    const state = link.state === "loaded" ? "ready" : "failed";
    item.append(" ", el("span", link.state, "badge state-" + state));
    const detail = [link.scope, link.on_error && "on error: " + link.on_error, link.error].filter(Boolean).join(" · ");
    if (detail) item.append(" ", el("span", detail, "muted"));
    list.append(item);
  }
}

function drawLatency(rows, windowSeconds) {
  $("#window").textContent = "(last " + Math.round(windowSeconds / 60) + " min)";
  const body = $("#latency tbody");
  body.replaceChildren();
  if (!rows.length) body.append(row([el("td", "no calls yet", "muted"), "", "", "", "", ""]));
  for (const r of rows) body.append(row([r.tool, num(r.calls), num(r.errors), num(ms(r.p50_ms)), num(ms(r.p95_ms)), num(ms(r.p99_ms))]));
  drawChart(rows.slice(0, 8));
}

// Three bars a tool (p50, p95, p99) on one scale, drawn by hand in SVG.
function drawChart(rows) {
  const svg = $("#chart");
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const width = 600, height = 160, bottom = 20;
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  if (!rows.length) return;
  const top = Math.max(...rows.map((r) => r.p99_ms), 0.001);
  const slot = width / rows.length;
  const bar = Math.min(24, (slot - 8) / 3);
  rows.forEach((r, i) => {
    ["p50", "p95", "p99"].forEach((key, k) => {
      const value = r[key + "_ms"];
      const h = Math.max(1, (value / top) * (height - bottom - 14));
      const rect = document.createElementNS(ns, "rect");
      rect.setAttribute("x", i * slot + 4 + k * bar);
      rect.setAttribute("y", height - bottom - h);
      rect.setAttribute("width", bar - 1);
      rect.setAttribute("height", h);
      rect.setAttribute("class", key);
      const title = document.createElementNS(ns, "title");
      title.textContent = r.tool + " " + key + " " + ms(value) + " ms";
      rect.append(title);
      svg.append(rect);
    });
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", i * slot + 4);
    label.setAttribute("y", height - 5);
    label.textContent = r.tool.length > 18 ? r.tool.slice(0, 17) + "…" : r.tool;
    svg.append(label);
  });
  const scale = document.createElementNS(ns, "text");
  scale.setAttribute("x", width - 4);
  scale.setAttribute("y", 11);
  scale.setAttribute("text-anchor", "end");
  scale.textContent = ms(top) + " ms";
  svg.append(scale);
}

function describe(event) {
  if (event.event_type === "tool.called") {
    const outcome = event.cancelled ? "cancelled" : event.error ? "error: " + event.error : "ok";
    return event.tool + " · " + event.server + " · " + ms(event.duration_ms) + " ms · " + outcome;
  }
  const extra = event.error || event.reason || event.detail || "";
  return event.event_type + " · " + event.source + (extra ? " · " + extra : "");
}

function addToFeed(event, atTop) {
  const item = el("li", null, event.status);
  item.dataset.type = event.event_type;
  if (event.tool) item.dataset.tool = event.tool;
  const time = el("time", (event.timestamp || "").slice(11, 23));
  item.append(time, describe(event));
  const feed = $("#feed");
  if (atTop) feed.prepend(item); else feed.append(item);
  while (feed.children.length > FEED_MAX) feed.lastChild.remove();
}

async function refresh() {
  const answer = await fetch("/ui/status.json", { credentials: "same-origin", cache: "no-store" });
  if (answer.status === 401) { location.reload(); return null; }
  if (!answer.ok) throw new Error("status.json: " + answer.status);
  const status = await answer.json();
  const gateway = status.gateway;
  $("#gateway").textContent = gateway.name + " " + gateway.version;
  $("#summary").textContent = gateway.tool_count + " tools · up " + gateway.uptime_s + " s";
  $("#principal").textContent = status.ui.principal ? "as " + status.ui.principal : "";
  drawBackends(status.backends);
  drawSessions(status.ui.sessions);
  drawMiddleware(status.middleware);
  drawLatency(status.ui.latency, status.ui.latency_window_s);
  return status;
}

let pending = null;
// Many events at once (a burst of calls) redraw the status once.
function refreshSoon(delay) {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh().catch(console.warn); }, delay);
}

async function start() {
  const status = await refresh();
  if (!status) return;
  for (const event of status.ui.events) addToFeed(event, false);
  const source = new EventSource("/ui/events");
  source.onopen = () => { $("#live").className = "badge on"; };
  source.onerror = () => { $("#live").className = "badge off"; };
  source.onmessage = (message) => {
    const event = JSON.parse(message.data);
    addToFeed(event, true);
    refreshSoon(event.event_type === "tool.called" ? 1000 : 100);
  };
  setInterval(() => refreshSoon(0), 5000);
}

start().catch((error) => { $("#summary").textContent = "cannot read the status: " + error.message; });
