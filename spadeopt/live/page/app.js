// spadeopt live page: polls api/state every second, api/plan once, and draws the plan
// layout (spadeopt.plan.picture.layout, the same as the PNG's) as inline SVG. Read-only;
// fetches nothing but this server's /api routes.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const SCALE = 64;            // SVG pixels per layout unit
const PERIOD_MS = 1000;
const BP_MARK = 0.2;         // backpressure fraction from which a PE box is marked
const TOKEN = new URLSearchParams(location.search).get("token");
const HEADERS = TOKEN ? { Authorization: "Bearer " + TOKEN } : {};

let layout = null;           // the plan layout, once fetched
let lastStatus = null;
let misses = 0;

const $ = (id) => document.getElementById(id);

function fmtRate(r) {
  if (r === null || r === undefined) return "–";
  if (r >= 1e6) return (r / 1e6).toFixed(2) + " M/s";
  if (r >= 1e3) return (r / 1e3).toFixed(1) + " k/s";
  return Math.round(r).toLocaleString("en") + "/s";
}
function fmtInt(n) { return n === null || n === undefined ? "–" : Math.round(n).toLocaleString("en"); }
function fmtPct(f) { return f === null || f === undefined ? "–" : Math.round(f * 100) + "%"; }
function fmtCores(c) { return c === null || c === undefined ? "–" : c.toFixed(2); }
function fmtMs(ms) {
  if (ms === null || ms === undefined) return "–";
  return ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : ms >= 10 ? ms.toFixed(0) + " ms" : ms.toFixed(1) + " ms";
}
function fmtSecs(s) {
  if (s === null || s === undefined) return "–";
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  const m = Math.floor(s / 60), h = Math.floor(m / 60);
  return h ? h + "h " + String(m % 60).padStart(2, "0") + "m" : m + "m " + String(Math.floor(s % 60)).padStart(2, "0") + "s";
}
function fmtBytes(b) {
  if (b === null || b === undefined) return "–";
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(1) : b) + " " + u[i];
}

// busy fraction 0..1 -> fill from pale blue-white to a hot orange
function busyFill(f) {
  const t = Math.max(0, Math.min(1, f || 0));
  const a = [247, 251, 255], b = [240, 128, 88];
  const c = a.map((v, i) => Math.round(v + (b[i] - v) * t));
  return "rgb(" + c.join(",") + ")";
}

function el(tag, attrs, parent, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

async function getJSON(path) {
  const res = await fetch(path, { headers: HEADERS, cache: "no-store" });
  if (!res.ok) throw new Error(path + ": HTTP " + res.status);
  return res.json();
}

// ---- the plan drawing, built once from the layout ---------------------------------------

function drawPlan(lay) {
  if (!lay || !Array.isArray(lay.boxes)) {
    $("plan").replaceChildren(Object.assign(document.createElement("p"), {
      className: "empty", textContent: "no plan picture for this run: the PEs are listed below" }));
    return;
  }
  const X = (x) => (x * SCALE).toFixed(1), Y = (y) => ((lay.top - y) * SCALE).toFixed(1);
  const W = lay.width * SCALE, H = (lay.top - lay.bottom) * SCALE;
  const svg = el("svg", { viewBox: "0 0 " + W.toFixed(0) + " " + H.toFixed(0), width: W.toFixed(0),
                          height: H.toFixed(0), id: "plan-svg", role: "img" });
  const defs = el("defs", {}, svg);
  const marker = el("marker", { id: "arrowhead", viewBox: "0 0 10 10", refX: "9", refY: "5", markerUnits: "userSpaceOnUse",
                                markerWidth: "10", markerHeight: "10", orient: "auto-start-reverse" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#2f5d8a" }, marker);
  for (const c of lay.columns) {
    const g = el("g", { class: "column", "data-node": c.node }, svg);
    el("rect", { x: X(c.x), y: Y(c.y + c.h), width: X(c.w), height: X(c.h), rx: 8 }, g);
    el("text", { x: X(c.label_at[0]), y: (+Y(c.label_at[1]) + 16).toFixed(1) }, g, c.label);
  }
  const links = el("g", { class: "links" }, svg);
  for (const b of lay.boxes) drawBox(svg, b, X, Y, lay.line_h);
  for (const a of lay.arrows) drawArrow(links, a, X, Y);
  if (lay.legend.length) {
    const g = el("g", { class: "legend" }, svg);
    lay.legend.forEach((line, i) => {
      el("text", { x: X(lay.legend_at[0]), y: (+Y(lay.legend_at[1]) + 12 + i * 14).toFixed(1),
                   "xml:space": "preserve" }, g, line);
    });
  }
  const host = $("plan");
  host.replaceChildren(svg);
  $("plan-title").textContent = lay.title;
}

function drawBox(svg, b, X, Y, lineH) {
  const g = el("g", { class: "pe", "data-pe": b.pe, "data-node": b.node, id: "pe-" + b.pe }, svg);
  const top = +Y(b.y + b.h), left = +X(b.x), w = +X(b.w), h = +X(b.h);
  el("rect", { class: "box", x: left, y: top, width: w, height: h, rx: 5, fill: busyFill(0) }, g);
  el("title", {}, g, b.pe);
  el("text", { class: "title", x: X(b.title_at[0]), y: (+Y(b.title_at[1]) + 13).toFixed(1) }, g, b.title);
  el("text", { class: "pe-flag", x: (left + w).toFixed(1), y: (top - 5).toFixed(1) }, g, "");
  for (const [text, x, y, channel] of b.lines) {
    el("text", { class: channel ? "op channel" : "op", x: X(x), y: (+Y(y) + 12).toFixed(1) }, g, text);
  }
  if (b.live_at) {
    const lx = X(b.live_at[0]), ly = +Y(b.live_at[1]), step = lineH * SCALE;
    el("text", { class: "live pe-rate", x: lx, y: (ly + 13).toFixed(1) }, g, "–");
    el("text", { class: "live pe-cpu", x: lx, y: (ly + 13 + step).toFixed(1) }, g, "–");
    el("text", { class: "live pe-queue", x: lx, y: (ly + 13 + 2 * step).toFixed(1) }, g, "–");
  }
  const barY = (top + h - 6).toFixed(1), barW = w - 12;
  el("rect", { class: "busybar-bg", x: left + 6, y: barY, width: barW, height: 3, rx: 1.5 }, g);
  el("rect", { class: "busybar", x: left + 6, y: barY, width: 0, height: 3, rx: 1.5, "data-w": barW }, g);
  el("rect", { class: "bpbar", x: left + 6 + barW, y: barY, width: 0, height: 3, "data-w": barW,
               "data-x": left + 6 + barW }, g);
}

function drawArrow(parent, a, X, Y) {
  const g = el("g", { class: "link", "data-from": a.src, "data-to": a.dst }, parent);
  const d = "M" + X(a.start[0]) + "," + Y(a.start[1]) + " Q" + X(a.ctrl[0]) + "," + Y(a.ctrl[1]) +
            " " + X(a.end[0]) + "," + Y(a.end[1]);
  el("path", { d: d, "marker-end": "url(#arrowhead)", "stroke-width": 1.2 }, g);
  if (a.label_at) {
    const x = +X(a.label_at[0]), y = +Y(a.label_at[1]);
    const r = el("rect", { x: x - 36, y: y - 9, width: 72, height: 18, rx: 4 }, g);
    const t = el("text", { class: "link-rate", x: x, y: y, "data-planned": a.label }, g, a.label);
    t.dataset.box = "1";
    r.dataset.box = "1";
  }
}

// ---- live numbers ------------------------------------------------------------------------

function updatePlan(state) {
  const svg = $("plan-svg");
  if (!svg) return;
  const pes = new Map((state.pes || []).map((p) => [p.pe, p]));
  for (const g of svg.querySelectorAll("g.pe")) {
    const p = pes.get(g.dataset.pe);
    const bn = state.bottleneck === g.dataset.pe;
    const bp = p && (p.backpressure || 0) >= BP_MARK;
    g.classList.toggle("bottleneck", bn);
    g.classList.toggle("backpressure", !!bp);
    g.classList.toggle("down", !!p && p.up === false && !p.done);
    g.querySelector("rect.box").setAttribute("fill", busyFill(p ? p.busy : 0));
    g.querySelector(".pe-flag").textContent = bn ? "★ bottleneck" : bp ? "‖ backpressure" : p && p.done ? "done" : p && p.up === false ? "down" : "";
    const set = (cls, text) => { const t = g.querySelector(cls); if (t) t.textContent = text; };
    if (!p) { set(".pe-rate", "no data yet"); continue; }
    set(".pe-rate", "in " + fmtRate(p.rate_in) + "  ·  out " + fmtRate(p.rate_out));
    set(".pe-cpu", "cpu " + fmtCores(p.cpu) + "  ·  busy " + fmtPct(p.busy) + "  ·  bp " + fmtPct(p.backpressure));
    set(".pe-queue", "queued " + fmtInt(p.queued) + (p.restarts ? "  ·  restarts " + p.restarts : ""));
    const bar = g.querySelector(".busybar"), bpbar = g.querySelector(".bpbar");
    const w = +bar.dataset.w;
    bar.setAttribute("width", (w * Math.min(1, p.busy || 0)).toFixed(1));
    const bw = w * Math.min(1, p.backpressure || 0);
    bpbar.setAttribute("width", bw.toFixed(1));
    bpbar.setAttribute("x", (+bpbar.dataset.x - bw).toFixed(1));
  }
  const rates = new Map();
  for (const l of state.links || []) {
    const k = l.from_pe + ">" + l.to_pe;
    if (l.rate !== null && l.rate !== undefined) rates.set(k, (rates.get(k) || 0) + l.rate);
  }
  const max = Math.max(1, ...rates.values());
  for (const g of svg.querySelectorAll("g.link")) {
    const r = rates.get(g.dataset.from + ">" + g.dataset.to);
    const t = g.querySelector(".link-rate");
    g.classList.toggle("live", r !== undefined);
    g.querySelector("path").setAttribute("stroke-width", r === undefined ? 1.2 : (1 + 3 * Math.sqrt(r / max)).toFixed(2));
    if (t) {
      t.textContent = r === undefined ? t.dataset.planned : fmtRate(r);
      fitLabel(g.querySelector("rect"), t);
    }
  }
}

// the label's box as wide as its text
function fitLabel(rect, text) {
  let w = 0;
  try { w = text.getComputedTextLength(); } catch (e) { return; }
  if (!w) return;
  const x = +text.getAttribute("x");
  rect.setAttribute("x", (x - w / 2 - 5).toFixed(1));
  rect.setAttribute("width", (w + 10).toFixed(1));
}

function rows(tbodySel, items, cells, rowClass) {
  const tbody = document.querySelector(tbodySel + " tbody");
  tbody.replaceChildren();
  if (!items.length) {
    const tr = tbody.insertRow(), td = tr.insertCell();
    td.colSpan = 9; td.className = "none"; td.textContent = "none";
    return;
  }
  for (const it of items) {
    const tr = tbody.insertRow();
    if (rowClass) tr.className = rowClass(it);
    for (const [cls, text] of cells(it)) {
      const td = tr.insertCell();
      if (cls) td.className = cls;
      td.textContent = text;
    }
  }
}

function updatePanels(s) {
  $("app").textContent = s.app || "?";
  $("strategy").textContent = s.strategy ? "(" + s.strategy + ")" : "";
  const st = $("status");
  st.textContent = s.status || "?";
  st.className = "status status-" + (["starting", "running", "done", "failed"].includes(s.status) ? s.status : "unknown");
  $("elapsed").textContent = s.started && s.now ? fmtSecs(s.now - s.started) : "–";
  const srcs = s.sources || [];
  $("total-rate").textContent = srcs.length ? fmtRate(srcs.reduce((a, x) => a + (x.rate || 0), 0)) : "–";
  $("bottleneck").textContent = s.bottleneck || "none";
  $("restarts").textContent = fmtInt(s.restarts || 0);
  const lat = s.latency;
  $("lat-p50").textContent = lat ? fmtMs(lat.p50_ms) : "–";
  $("lat-p99").textContent = lat ? fmtMs(lat.p99_ms) : "–";
  $("lat-count").textContent = lat ? fmtInt(lat.count) : "–";
  const ck = s.checkpoints;
  $("ckpt-taken").textContent = ck ? fmtInt(ck.taken) : "off";
  $("ckpt-age").textContent = ck ? fmtSecs(ck.age_s) : "–";
  $("ckpt-duration").textContent = ck ? fmtSecs(ck.last_duration_s) : "–";
  $("ckpt-bytes").textContent = ck ? fmtBytes(ck.last_bytes) : "–";
  const ad = s.adaptive;  // run --adaptive: its phase, plan and the switch it made
  $("adaptive-card").hidden = !ad;
  if (ad) {
    $("adaptive-phase").textContent = String(ad.phase);
    $("adaptive-plan").textContent = ad.plan || "";
    $("adaptive-switch").textContent = ad.switch || "";
    $("adaptive-why").textContent = ad.why || "";
  }
  rows("#sources", srcs, (x) => [["source-name", x.source], ["source-rate", fmtRate(x.rate)],
    ["source-tuples", fmtInt(x.tuples)], ["source-lag", x.lag === null || x.lag === undefined ? (x.live ? "?" : "–") : fmtInt(x.lag)]]);
  rows("#sinks", s.sinks || [], (x) => [["sink-name", x.sink], ["sink-rate", fmtRate(x.rate)], ["sink-tuples", fmtInt(x.tuples)]]);
  const pes = s.pes || [];
  rows("#nodes", s.nodes || [], (n) => {
    const mine = pes.filter((p) => p.node === n.node);
    return [["", String(n.node)], ["", n.host || "?"], ["", String(mine.length)],
            ["", fmtCores(mine.reduce((a, p) => a + (p.cpu || 0), 0))]];
  });
  rows("#pes", pes, (p) => [["", p.pe], ["", String(p.node)], ["", fmtRate(p.rate_in)], ["", fmtRate(p.rate_out)],
    ["", fmtCores(p.cpu)], ["", fmtPct(p.busy)], ["", fmtPct(p.backpressure)], ["", fmtInt(p.queued)],
    ["", fmtInt(p.restarts)]], (p) => (p.pe === s.bottleneck ? "bottleneck" : "") + (p.up === false && !p.done ? " down" : ""));
}

function say(text) {
  const m = $("message");
  m.hidden = !text;
  m.textContent = text || "";
}

async function tick() {
  try {
    if (!layout) {
      layout = await getJSON("api/plan");
      drawPlan(layout);
    }
    const state = await getJSON("api/state");
    misses = 0;
    lastStatus = state.status;
    $("conn").className = "live-dot ok";
    updatePanels(state);
    updatePlan(state);
    $("updated").textContent = new Date().toLocaleTimeString();
    say(state.status === "done" ? "the job is done: these are its final numbers" :
        state.status === "failed" ? "the job failed: these are its last numbers" : "");
  } catch (err) {
    misses++;
    $("conn").className = "live-dot lost";
    if (misses >= 2) {
      say(lastStatus === "done" || lastStatus === "failed"
        ? "the job has ended and its server is gone: the last numbers are shown"
        : "no answer from the job (" + err.message + "): retrying");
    }
  }
  setTimeout(tick, PERIOD_MS);
}

for (const a of document.querySelectorAll("footer a")) {
  if (TOKEN) a.href = a.getAttribute("href") + "?token=" + encodeURIComponent(TOKEN);
}
tick();
