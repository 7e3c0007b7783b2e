// playground.js — the numbers of docs/playground/index.html, computed as dcp-verify computes them:
// the layout (gpu/kernels/layout.hpp, `dcp-verify layout`), the merge of two partials under a
// shift of one shard's LSE (lesson 04), and the break-even model (tools/model_cmd.cpp,
// `dcp-verify model`). tests/docs/playground_test.sh sets the inputs through the page's query
// string and compares what the page shows with the CLI's output for the same inputs.
"use strict";

// ---- The layout: token p on rank floor(p / I) mod N, in row floor(p / (I N)) I + p mod I ----
const owner = (p, n, i) => Math.floor(p / i) % n;
const row = (p, n, i) => Math.floor(p / (i * n)) * i + (p % i);
// Positions < x that rank r owns: whole rounds of I N positions give I each, the partial round
// gives what falls in r's block of I.
const count = (r, x, n, i) =>
  Math.floor(x / (i * n)) * i + Math.min(Math.max((x % (i * n)) - r * i, 0), i);
// The rows rank r needs for a context of s tokens (rows_for(r, s)).
const rowsFor = (r, s, n, i) => count(r, s, n, i);

// ---- Two partials merged, one shard's LSE shifted by c (natural-log units) ----
// The true output weighs each partial by exp(L_r): O(c) = (e^L0 O0 + e^(L1 + c) O1) / (e^L0 +
// e^(L1 + c)), computed with the maximum subtracted; the unweighted mean (O0 + O1) / 2 ignores c.
function mergeTwo(o0, l0, o1, l1, c) {
  const a = l0, b = l1 + c, m = Math.max(a, b);
  const w0 = Math.exp(a - m), w1 = Math.exp(b - m);
  return { merged: (w0 * o0 + w1 * o1) / (w0 + w1), mean: (o0 + o1) / 2, w1: w1 / (w0 + w1) };
}

// ---- The break-even model (tools/model_cmd.cpp) ----
const PRESETS = {
  "k3-mla": { hq: 96, hkv: 1, dk: 576, dv: 512, latent: true, tp: 8, n: 8, comm: "a2a", repq: true, kv: null },
  "k3-mla-fp8": { hq: 96, hkv: 1, dk: 576, dv: 512, latent: true, tp: 8, n: 8, comm: "a2a", repq: true, kv: "fp8e4m3" },
  "deepseek-v3": { hq: 128, hkv: 1, dk: 576, dv: 512, latent: true, tp: 8, n: 8, comm: "a2a", repq: false, kv: null },
  "llama3-70b": { hq: 64, hkv: 8, dk: 128, dv: 128, latent: false, tp: 8, n: 8, comm: "ag_rs", repq: false, kv: null },
};
const BYTES = { bf16: 2, f16: 2, f32: 4, fp8e4m3: 1, fp8e5m2: 1 };
const LSE_BYTES = 4;  // b_L: LSE in fp32
const GIGA = 1e9, TERA = 1e12, MICRO = 1e-6;

// The KV heads read by the busiest TP rank when each holds `perRank` query heads in groups of n
// ranks (DcpGeometry::kv_heads over every group's first rank).
function kvHeadsRead(p, n) {
  const hLoc = p.hq / p.tp, hg = n * hLoc, gs = p.hq / p.hkv;
  let most = 0;
  for (let rank = 0; rank < p.tp; rank += n) {
    const head0 = Math.floor(rank / n) * hg;
    most = Math.max(most, Math.floor((head0 + hg - 1) / gs) - Math.floor(head0 / gs) + 1);
  }
  return most;
}

function buildModel(presetName, o) {
  const p = PRESETS[presetName];
  const kvName = o.kv || p.kv || "bf16";
  const m = {
    p, b: o.batch, t: 1, bKv: BYTES[kvName], bQ: 2, bO: 4, kvName,
    hLoc: p.hq / p.tp, hg: p.n * (p.hq / p.tp),
    kvhTp: kvHeadsRead(p, 1), kvhDcp: kvHeadsRead(p, p.n),
    hbm: o.hbm, tflops: o.tflops, link: o.link, latency: o.latency,
  };
  const peers = p.n - 1, rows = m.b * m.t;
  m.qBytes = p.repq ? 0 : peers * rows * m.hLoc * p.dk * m.bQ;
  const a2a = p.comm === "a2a";
  m.combineBytes = a2a ? peers * rows * m.hLoc * (p.dv * m.bO + LSE_BYTES)
                       : peers * rows * (m.hg * LSE_BYTES + m.hLoc * p.dv * m.bO);
  m.collectives = p.n === 1 ? 0 : (p.repq ? 0 : 1) + (a2a ? 1 : 2);
  m.commBytes = m.qBytes + m.combineBytes;
  m.tComm = m.collectives * m.latency * MICRO + m.commBytes / (m.link * GIGA);
  m.kvTokenBytes = (kvh) => kvh * (p.latent ? p.dk : p.dk + p.dv) * m.bKv;
  m.attn = (heads, kvh, keys) => Math.max(
    (m.b * keys * m.kvTokenBytes(kvh)) / (m.hbm * GIGA),
    (2 * m.b * m.t * heads * keys * (p.dk + p.dv)) / (m.tflops * TERA));
  return m;
}

// One row of `dcp-verify model --seq S`: the two attention times, the communication, the speedup,
// whether DCP pays; and the break-even context length.
function modelRow(m, s) {
  const local = rowsFor(0, s, m.p.n, 1);  // ceil(S / N): rank 0 is the busiest
  const tTp = m.attn(m.hLoc, m.kvhTp, s), tDcp = m.attn(m.hg, m.kvhDcp, local);
  const cTp = m.attn(m.hLoc, m.kvhTp, 1), cDcp = m.attn(m.hg, m.kvhDcp, 1);
  return {
    kvBytes: m.b * local * m.kvTokenBytes(m.kvhDcp),
    tTp, tDcp, tComm: m.tComm,
    speedup: tTp / (tDcp + m.tComm),
    pays: tTp - tDcp > m.tComm,
    breakEven: cTp <= cDcp / m.p.n ? null : m.tComm / (cTp - cDcp / m.p.n),
  };
}

// ---- The page ----
const $ = (id) => document.getElementById(id);
const RANK_COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
  "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

function setText(id, text) { $(id).textContent = text; }

function drawLayout() {
  const n = +$("n").value, i = +$("i").value, a = +$("a").value, len = +$("len").value;
  setText("n-val", n); setText("i-val", i); setText("a-val", a); setText("len-val", len);
  const strip = $("strip");
  strip.innerHTML = "";
  for (let p = a; p < a + len; ++p) {
    const cell = document.createElement("span");
    cell.className = "tok";
    cell.style.background = RANK_COLORS[owner(p, n, i) % RANK_COLORS.length];
    cell.title = `position ${p}: rank ${owner(p, n, i)}, row ${row(p, n, i)}`;
    cell.textContent = p;
    strip.appendChild(cell);
  }
  const body = $("shares");
  body.innerHTML = "";
  for (let r = 0; r < n; ++r) {
    const lo = count(r, a, n, i), hi = count(r, a + len, n, i);
    const tr = document.createElement("tr");
    tr.innerHTML = `<td><span class="swatch" style="background:${RANK_COLORS[r % RANK_COLORS.length]}"></span>${r}</td>` +
      `<td id="share-${r}">${hi - lo}</td><td id="rows-${r}">[${lo}, ${hi})</td>`;
    body.appendChild(tr);
  }
}

function drawShift() {
  const c = +$("c").value;
  setText("c-val", c.toFixed(2));
  const o0 = 1.0, l0 = 0.0, o1 = 3.0, l1 = 0.0;
  const now = mergeTwo(o0, l0, o1, l1, c);
  setText("merged", now.merged.toFixed(6));
  setText("mean", now.mean.toFixed(6));
  setText("weight1", now.w1.toFixed(6));
  // O(c) over c in [-6, 6] and the flat mean, as an SVG polyline (y from O0 = 1 to O1 = 3).
  const w = 360, h = 140, x = (cc) => ((cc + 6) / 12) * w, y = (v) => h - ((v - 0.8) / 2.4) * h;
  let pts = "";
  for (let k = 0; k <= 120; ++k) {
    const cc = -6 + (12 * k) / 120;
    pts += `${x(cc).toFixed(1)},${y(mergeTwo(o0, l0, o1, l1, cc).merged).toFixed(1)} `;
  }
  $("shift-plot").innerHTML =
    `<polyline points="${pts}" fill="none" stroke="#4e79a7" stroke-width="2"/>` +
    `<line x1="0" x2="${w}" y1="${y(2)}" y2="${y(2)}" stroke="#e15759" stroke-dasharray="4 3"/>` +
    `<circle cx="${x(c)}" cy="${y(now.merged)}" r="4" fill="#4e79a7"/>` +
    `<text x="4" y="${y(2) - 4}" font-size="10" fill="#e15759">unweighted mean</text>` +
    `<text x="4" y="12" font-size="10" fill="#4e79a7">true O(c)</text>`;
}

function drawModel() {
  const preset = $("preset").value;
  const s = 2 ** +$("log2s").value, batch = +$("batch").value;
  const o = {
    kv: $("kv").value === "preset" ? null : $("kv").value, batch,
    hbm: +$("hbm").value, tflops: +$("tflops").value, link: +$("link").value,
    latency: +$("latency").value,
  };
  setText("s-val", s); setText("batch-val", batch); setText("hbm-val", o.hbm);
  setText("link-val", o.link); setText("latency-val", o.latency);
  const m = buildModel(preset, o);
  const r = modelRow(m, s);
  setText("kv-name", m.kvName);
  setText("t-tp", (r.tTp / MICRO).toFixed(3));
  setText("t-dcp", (r.tDcp / MICRO).toFixed(3));
  setText("t-comm", (r.tComm / MICRO).toFixed(3));
  setText("speedup", r.speedup.toFixed(3));
  setText("pays", r.pays ? "yes" : "no");
  setText("break-even", r.breakEven === null ? "never" : r.breakEven.toFixed(0));
  // Speedup over S = 1K .. 1M (log scale), with 1 marked.
  const w = 360, h = 140, lo = 10, hi = 20;
  const rows = [];
  for (let e = lo; e <= hi; e += 0.25) rows.push([e, modelRow(m, Math.round(2 ** e)).speedup]);
  const top = Math.max(2, ...rows.map((q) => q[1]));
  const x = (e) => ((e - lo) / (hi - lo)) * w, y = (v) => h - (v / top) * h;
  $("model-plot").innerHTML =
    `<polyline points="${rows.map(([e, v]) => `${x(e).toFixed(1)},${y(v).toFixed(1)}`).join(" ")}" fill="none" stroke="#59a14f" stroke-width="2"/>` +
    `<line x1="0" x2="${w}" y1="${y(1)}" y2="${y(1)}" stroke="#888" stroke-dasharray="4 3"/>` +
    `<circle cx="${x(Math.log2(s))}" cy="${y(r.speedup)}" r="4" fill="#59a14f"/>` +
    `<text x="4" y="${y(1) - 4}" font-size="10" fill="#888">speedup 1</text>` +
    `<text x="${w - 4}" y="${h - 4}" font-size="10" text-anchor="end">S = 1K … 1M</text>`;
}

// The query string sets any input by its id (?n=4&i=2&a=3&len=13&preset=llama3-70b&log2s=17).
// A value the input cannot hold is refused, not clamped or snapped: the page names the key, what
// it expected and the value it kept, one line each (#query-problems).
function refusal(el, v) {
  if (el.tagName === "SELECT") {
    const offered = [...el.options].map((o) => o.value);
    return offered.includes(v) ? null : `expected one of ${offered.join(", ")}`;
  }
  const lo = el.getAttribute("min"), hi = el.getAttribute("max");
  const step = Number(el.getAttribute("step") || 1);
  const range = hi === null ? `a number ≥ ${lo}` : `a number in [${lo}, ${hi}]`;
  const x = v.trim() === "" ? NaN : Number(v);
  if (!Number.isFinite(x) || x < Number(lo) || (hi !== null && x > Number(hi))) {
    return `expected ${range}`;
  }
  const q = (x - Number(lo)) / step;
  if (el.type === "range" && Math.abs(q - Math.round(q)) > 1e-9) {
    return `expected ${range} in steps of ${step}`;
  }
  return null;
}

function applyQuery() {
  const problems = [];
  const inputs = [...document.querySelectorAll("input, select")].map((e) => e.id);
  for (const [k, v] of new URLSearchParams(window.location.search)) {
    const el = inputs.includes(k) ? $(k) : null;
    const why = el === null ? `not an input of this page (${inputs.join(", ")})` : refusal(el, v);
    if (why === null) el.value = v;
    else problems.push(`query ${k}=${v}: ${why}` + (el === null ? "" : `; kept ${el.value}`));
  }
  const box = $("query-problems");
  box.textContent = problems.join("\n");
  box.hidden = problems.length === 0;
}

function typeset() {
  if (typeof katex === "undefined") return;  // no KaTeX: the TeX source stays readable
  for (const el of document.querySelectorAll(".tex")) {
    katex.render(el.textContent, el, { throwOnError: false, displayMode: el.tagName === "DIV" });
  }
}

window.addEventListener("DOMContentLoaded", () => {
  applyQuery();
  for (const id of ["n", "i", "a", "len"]) $(id).addEventListener("input", drawLayout);
  $("c").addEventListener("input", drawShift);
  for (const id of ["preset", "log2s", "batch", "kv", "hbm", "tflops", "link", "latency"])
    $(id).addEventListener("input", drawModel);
  drawLayout();
  drawShift();
  drawModel();
  typeset();
  document.body.dataset.ready = "yes";
});
