// playground.js — the numbers of docs/playground/index.html, computed as dcp-verify computes them:
// the layout (gpu/kernels/layout.hpp, `dcp-verify layout`), the merge of two partials under a
// shift of one shard's LSE, right and with the LSE bases mixed (lessons 03, 04), and the break-even
// model (tools/model_cmd.cpp, `dcp-verify model`) with the deployment's choices (N, TP, combine,
// q path, partial format). tests/docs/playground_test.sh sets the inputs through the page's query
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
// With `mixed`, shard 1's kernel reports its LSE in base 2 (times log2 e) and the merge takes it
// as base e (the catalogue's merge_base_mismatch).
function mergeTwo(o0, l0, o1, l1, c, mixed = false) {
  const a = l0, b = (l1 + c) * (mixed ? Math.LOG2E : 1), m = Math.max(a, b);
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

// The KV heads read by the busiest TP rank when each holds Hq / tp query heads in groups of n
// ranks (DcpGeometry::kv_heads over every group's first rank).
function kvHeadsRead(p, tp, n) {
  const hLoc = p.hq / tp, hg = n * hLoc, gs = p.hq / p.hkv;
  let most = 0;
  for (let rank = 0; rank < tp; rank += n) {
    const head0 = Math.floor(rank / n) * hg;
    most = Math.max(most, Math.floor((head0 + hg - 1) / gs) - Math.floor(head0 / gs) + 1);
  }
  return most;
}

// The geometry's refusal, in `dcp-verify model`'s words, or null. (Every preset's Hq is a
// multiple of each TP offered.)
const geometryProblem = (tp, n) =>
  tp % n === 0 ? null : `--tp-size ${tp} is not a multiple of --dcp-size ${n}`;

// The model of `dcp-verify model` for a preset and the page's choices (o.n, o.tp, o.comm, o.repq,
// o.partial: null keeps the preset's).
function buildModel(presetName, o) {
  const p = PRESETS[presetName];
  const kvName = o.kv || p.kv || "bf16";
  const n = o.n ?? p.n, tp = o.tp ?? p.tp;
  const m = {
    p, n, tp, b: o.batch, t: 1, bKv: BYTES[kvName], bQ: 2, bO: BYTES[o.partial || "f32"], kvName,
    comm: o.comm || p.comm, repq: o.repq ?? p.repq,
    hLoc: p.hq / tp, hg: n * (p.hq / tp),
    kvhTp: kvHeadsRead(p, tp, 1), kvhDcp: kvHeadsRead(p, tp, n),
    hbm: o.hbm, tflops: o.tflops, link: o.link, latency: o.latency,
  };
  const peers = n - 1, rows = m.b * m.t;
  m.qBytes = m.repq ? 0 : peers * rows * m.hLoc * p.dk * m.bQ;
  const a2a = m.comm === "a2a";
  m.combineBytes = a2a ? peers * rows * m.hLoc * (p.dv * m.bO + LSE_BYTES)
                       : peers * rows * (m.hg * LSE_BYTES + m.hLoc * p.dv * m.bO);
  m.collectives = n === 1 ? 0 : (m.repq ? 0 : 1) + (a2a ? 1 : 2);
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
  const local = rowsFor(0, s, m.n, 1);  // ceil(S / N): rank 0 is the busiest
  const tTp = m.attn(m.hLoc, m.kvhTp, s), tDcp = m.attn(m.hg, m.kvhDcp, local);
  const cTp = m.attn(m.hLoc, m.kvhTp, 1), cDcp = m.attn(m.hg, m.kvhDcp, 1);
  return {
    kvBytes: m.b * local * m.kvTokenBytes(m.kvhDcp),
    tTp, tDcp, tComm: m.tComm,
    speedup: tTp / (tDcp + m.tComm),
    pays: tTp - tDcp > m.tComm,
    breakEven: cTp <= cDcp / m.n ? null : m.tComm / (cTp - cDcp / m.n),
  };
}

// ---- The page ----
const $ = (id) => document.getElementById(id);
const RANK_COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
  "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

function setText(id, text) { $(id).textContent = text; }

// A plot's frame: the area inside margins, x and y ticks with labels, and the axes' names.
// xs, ys: [value, label] pairs; x(v), y(v) map values into the area. Returns SVG markup.
const PLOT = { left: 44, right: 12, top: 10, bottom: 34 };
function axes(svg, xs, ys, x, y, xName, yName) {
  const w = +svg.getAttribute("width"), h = +svg.getAttribute("height");
  const x0 = PLOT.left, x1 = w - PLOT.right, y0 = h - PLOT.bottom, y1 = PLOT.top;
  let out = `<line x1="${x0}" x2="${x1}" y1="${y0}" y2="${y0}" stroke="#444"/>` +
    `<line x1="${x0}" x2="${x0}" y1="${y0}" y2="${y1}" stroke="#444"/>`;
  for (const [v, label] of xs) {
    out += `<line x1="${x(v)}" x2="${x(v)}" y1="${y0}" y2="${y0 + 4}" stroke="#444"/>` +
      `<text x="${x(v)}" y="${y0 + 14}" font-size="9" text-anchor="middle">${label}</text>`;
  }
  for (const [v, label] of ys) {
    out += `<line x1="${x0 - 4}" x2="${x0}" y1="${y(v)}" y2="${y(v)}" stroke="#444"/>` +
      `<text x="${x0 - 6}" y="${y(v) + 3}" font-size="9" text-anchor="end">${label}</text>`;
  }
  return out + `<text x="${(x0 + x1) / 2}" y="${h - 4}" font-size="10" text-anchor="middle">${xName}</text>` +
    `<text x="10" y="${(y0 + y1) / 2}" font-size="10" text-anchor="middle" ` +
    `transform="rotate(-90 10 ${(y0 + y1) / 2})">${yName}</text>`;
}
// Maps [lo, hi] onto a plot's horizontal or vertical extent.
function scales(svg, xlo, xhi, ylo, yhi) {
  const w = +svg.getAttribute("width"), h = +svg.getAttribute("height");
  const x0 = PLOT.left, x1 = w - PLOT.right, y0 = h - PLOT.bottom, y1 = PLOT.top;
  return [(v) => x0 + ((v - xlo) / (xhi - xlo)) * (x1 - x0),
          (v) => y0 - ((v - ylo) / (yhi - ylo)) * (y0 - y1)];
}

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
    cell.id = `tok-${p}`;
    cell.innerHTML = `${p}<small>row ${row(p, n, i)}</small>`;
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
  const c = +$("c").value, mixed = $("mixbase").value === "1";
  setText("c-val", c.toFixed(2));
  const o0 = 1.0, l0 = 0.0, o1 = 3.0, l1 = 0.0;
  const now = mergeTwo(o0, l0, o1, l1, c), got = mergeTwo(o0, l0, o1, l1, c, mixed);
  setText("merged", now.merged.toFixed(6));
  setText("mean", now.mean.toFixed(6));
  setText("weight1", now.w1.toFixed(6));
  setText("as-merged", got.merged.toFixed(6));
  // O(c) over c in [-6, 6], the page's merge (the same curve unless the bases are mixed) and the
  // flat mean, y from O0 = 1 to O1 = 3.
  const svg = $("shift-plot"), [x, y] = scales(svg, -6, 6, 0.8, 3.2);
  const curve = (mix) => {
    let pts = "";
    for (let k = 0; k <= 120; ++k) {
      const cc = -6 + (12 * k) / 120;
      pts += `${x(cc).toFixed(1)},${y(mergeTwo(o0, l0, o1, l1, cc, mix).merged).toFixed(1)} `;
    }
    return pts;
  };
  svg.innerHTML =
    axes(svg, [-6, -3, 0, 3, 6].map((v) => [v, v]), [1, 2, 3].map((v) => [v, v]), x, y,
         "c, the shift of L₁", "merged O") +
    `<polyline points="${curve(false)}" fill="none" stroke="#4e79a7" stroke-width="2"/>` +
    (mixed ? `<polyline points="${curve(true)}" fill="none" stroke="#b07aa1" stroke-width="2" stroke-dasharray="6 3"/>` : "") +
    `<line x1="${x(-6)}" x2="${x(6)}" y1="${y(2)}" y2="${y(2)}" stroke="#e15759" stroke-dasharray="4 3"/>` +
    `<circle cx="${x(c)}" cy="${y(got.merged)}" r="4" fill="${mixed ? "#b07aa1" : "#4e79a7"}"/>` +
    `<text x="${x(-5.8)}" y="${y(2) - 4}" font-size="10" fill="#e15759">unweighted mean</text>` +
    `<text x="${x(-5.8)}" y="${y(3.05)}" font-size="10" fill="#4e79a7">true O(c)</text>` +
    (mixed ? `<text x="${x(-5.8)}" y="${y(2.75)}" font-size="10" fill="#b07aa1">bases mixed</text>` : "");
}

function drawModel() {
  const preset = $("preset").value;
  const s = 2 ** +$("log2s").value, batch = +$("batch").value;
  const pick = (id) => ($(id).value === "preset" ? null : $(id).value);
  const p = PRESETS[preset];
  const o = {
    kv: pick("kv"), batch,
    hbm: +$("hbm").value, tflops: +$("tflops").value, link: +$("link").value,
    latency: +$("latency").value,
    n: pick("dcp") === null ? null : +pick("dcp"), tp: pick("tp") === null ? null : +pick("tp"),
    comm: pick("comm"), repq: pick("qpath") === null ? null : pick("qpath") === "replicate",
    partial: $("partial").value,
  };
  setText("s-val", s); setText("batch-val", batch); setText("hbm-val", o.hbm);
  setText("link-val", o.link); setText("latency-val", o.latency);
  const n = o.n ?? p.n, tp = o.tp ?? p.tp;
  const problem = geometryProblem(tp, n);
  setText("geometry", problem || `TP ${tp} x DCP ${n}: ${tp / n} group${tp / n > 1 ? "s" : ""} of ${n}`);
  const ids = ["t-tp", "t-dcp", "comm-bytes", "collectives", "t-comm", "speedup", "pays", "break-even"];
  if (problem) {  // refused, as `dcp-verify model` refuses it: nothing computed
    for (const id of ids) setText(id, "-");
    setText("kv-name", o.kv || p.kv || "bf16");
    setText("choices", "-");
    $("model-plot").innerHTML = "";
    return;
  }
  const m = buildModel(preset, o);
  const r = modelRow(m, s);
  setText("kv-name", m.kvName);
  setText("choices", `${m.comm}, ${m.repq ? "replicate-q" : "gather-q"}, partial O ${o.partial}`);
  setText("t-tp", (r.tTp / MICRO).toFixed(3));
  setText("t-dcp", (r.tDcp / MICRO).toFixed(3));
  setText("comm-bytes", `${m.qBytes} + ${m.combineBytes} = ${m.commBytes}`);
  setText("collectives", m.collectives);
  setText("t-comm", (r.tComm / MICRO).toFixed(3));
  setText("speedup", r.speedup.toFixed(3));
  setText("pays", r.pays ? "yes" : "no");
  setText("break-even", r.breakEven === null ? "never" : r.breakEven.toFixed(0));
  // Speedup over S = 1K .. 1M (log scale), with 1 marked.
  const lo = 10, hi = 20, rows = [];
  for (let e = lo; e <= hi; e += 0.25) rows.push([e, modelRow(m, Math.round(2 ** e)).speedup]);
  const top = Math.ceil(Math.max(2, ...rows.map((q) => q[1])));
  const svg = $("model-plot"), [x, y] = scales(svg, lo, hi, 0, top);
  const sLabel = (e) => (e < 20 ? `${2 ** (e - 10)}K` : "1M");
  const step = Math.max(1, Math.ceil(top / 5));
  const yTicks = [];
  for (let v = 0; v <= top; v += step) yTicks.push([v, v]);
  svg.innerHTML =
    axes(svg, [10, 12, 14, 16, 18, 20].map((e) => [e, sLabel(e)]), yTicks, x, y,
         "S, context length (log scale)", "speedup") +
    `<polyline points="${rows.map(([e, v]) => `${x(e).toFixed(1)},${y(v).toFixed(1)}`).join(" ")}" fill="none" stroke="#59a14f" stroke-width="2"/>` +
    `<line x1="${x(lo)}" x2="${x(hi)}" y1="${y(1)}" y2="${y(1)}" stroke="#888" stroke-dasharray="4 3"/>` +
    `<circle cx="${x(Math.log2(s))}" cy="${y(r.speedup)}" r="4" fill="#59a14f"/>` +
    `<text x="${x(lo) + 4}" y="${y(1) - 4}" font-size="10" fill="#888">speedup 1: DCP pays above</text>`;
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

window.addEventListener("DOMContentLoaded", () => {
  applyQuery();
  for (const id of ["n", "i", "a", "len"]) $(id).addEventListener("input", drawLayout);
  for (const id of ["c", "mixbase"]) $(id).addEventListener("input", drawShift);
  for (const id of ["preset", "log2s", "batch", "kv", "dcp", "tp", "comm", "qpath", "partial",
                    "hbm", "tflops", "link", "latency"])
    $(id).addEventListener("input", drawModel);
  drawLayout();
  drawShift();
  drawModel();
  document.body.dataset.ready = "yes";
});
