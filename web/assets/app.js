// headroom's page: it gathers what the user gives, asks the API, and draws
// the answer. It computes no memory number of its own: every GiB, token and
// concurrency shown comes from /api/plan, as `headroom plan -o json` prints it.
"use strict";


// The plan's inputs: element id -> field of the /api/plan body. Flags are
// vLLM flags by name; the URL keeps every one of them (config.json uploads
// excepted: they do not fit in a link).
const TEXT_FIELDS = { "model": "model", "gpu": "gpu", "vllm-version": "vllm_version", "vllm-install": "vllm_install", "command": "command", "vllm-config": "vllm_config" };
// TERM_NAMES names the plan's parts as the bar does.
const TERM_NAMES = { weights_bytes: "weights", activation_bytes: "activation", non_torch_bytes: "non-torch", cudagraph_bytes: "CUDA graphs" };
const FLAG_FIELDS = ["max-model-len", "gpu-memory-utilization", "tensor-parallel-size", "max-num-seqs", "kv-cache-dtype"];
const SIM_IDS = ["sim-rate", "sim-seconds", "sim-prompt", "sim-output", "sim-burst-count", "sim-burst-tokens", "sim-burst-at", "sim-endpoint"];
// UPGRADE_FIELDS ask /api/plan for the upgrade preflight (`headroom plan
// --upgrade-to`); they are not part of the plan the other panels use.
const UPGRADE_FIELDS = { "upgrade-to": "upgrade_to", "max-kv-loss": "max_kv_loss" };
const STATE_IDS = [...Object.keys(TEXT_FIELDS), "gpu-count", ...FLAG_FIELDS, ...Object.keys(UPGRADE_FIELDS), ...SIM_IDS];

let uploadedConfig = null;

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text != null) e.textContent = text;
  return e;
}

function gib(x) { return Number(x).toFixed(2); }
function thousands(n) { return Number(n).toLocaleString("en-US"); }

// --- the form and the URL -------------------------------------------------

function planBody() {
  const body = {};
  for (const [id, key] of Object.entries(TEXT_FIELDS)) {
    const v = $(id).value.trim();
    if (v) body[key] = v;
  }
  const count = $("gpu-count").value.trim();
  if (count) body.gpu_count = Number(count);
  const flags = {};
  for (const id of FLAG_FIELDS) {
    const v = $(id).value.trim();
    if (v) flags[id] = v;
  }
  if (Object.keys(flags).length) body.flags = flags;
  if (uploadedConfig) body.config = uploadedConfig;
  return body;
}

// upgradeFields are the upgrade preflight's fields, or null without a
// release to upgrade to.
function upgradeFields() {
  const f = {};
  for (const [id, key] of Object.entries(UPGRADE_FIELDS)) {
    const v = $(id).value.trim();
    if (v) f[key] = v;
  }
  return Object.keys(f).length ? f : null;
}

function saveState() {
  const q = new URLSearchParams();
  for (const id of STATE_IDS) {
    const v = $(id).value.trim();
    if (v) q.set(id, v);
  }
  history.replaceState(null, "", "#" + q.toString());
}

function loadState() {
  const q = new URLSearchParams(location.hash.slice(1));
  let any = false;
  for (const id of STATE_IDS) {
    if (q.has(id)) { $(id).value = q.get(id); any = true; }
  }
  return any;
}

function fieldFor(message) {
  const m = message.toLowerCase();
  if (m.startsWith("upgrade_to")) return "upgrade-to";
  if (m.startsWith("max_kv_loss")) return "max-kv-loss";
  if (m.startsWith("command") || m.includes("vllm serve")) return "command";
  if (m.includes("gpu_count") || m.includes("gpu-count")) return "gpu-count";
  if (m.includes("gpu")) return "gpu";
  if (m.includes("config.json")) return "config";
  if (m.includes("model") && !m.includes("max-model-len")) return "model";
  for (const id of FLAG_FIELDS) if (m.includes(id)) return id;
  return null;
}

function showError(id, message) {
  const p = $(id);
  p.textContent = message;
  p.hidden = !message;
}

function markInvalid(field) {
  for (const id of [...Object.keys(TEXT_FIELDS), "gpu-count", ...FLAG_FIELDS, ...Object.keys(UPGRADE_FIELDS), "config"]) $(id).removeAttribute("aria-invalid");
  if (field) {
    $(field).setAttribute("aria-invalid", "true");
    $(field).setAttribute("aria-errormessage", "form-error");
  }
}

async function api(path, body) {
  const resp = await fetch(path, {
    method: body === undefined ? "GET" : "POST",
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await resp.json(); } catch (e) { data = { error: "the server answered " + resp.status + " without JSON" }; }
  if (!resp.ok) throw new Error((data && data.error) || ("the server answered " + resp.status));
  return data;
}

// --- the plan -----------------------------------------------------------

async function plan() {
  saveState();
  showError("form-error", "");
  markInvalid(null);
  const body = planBody();
  $("plan-button").disabled = true;
  try {
    const r = await api("/api/plan", body);
    renderPlan(r);
    const up = upgradeFields();
    $("upgrade").hidden = true;
    if (up) renderUpgrade(await api("/api/plan", Object.assign({}, body, up)));
    const all = Object.assign({}, body, { all_gpus: true });
    delete all.gpu; delete all.gpu_count;
    renderAllGPUs(await api("/api/plan", all), r.gpu.name);
  } catch (e) {
    showError("form-error", e.message);
    markInvalid(fieldFor(e.message));
  } finally {
    $("plan-button").disabled = false;
  }
}

// The bar's parts, in the CLI table's order, with the JSON's numbers
// (non-torch without the CUDA context, its own part). fitCard caps them at
// the card: the last part is what the parts need past it, when they do.
function barParts(p) {
  return fitCard([
    ["weights", "weights", p.weights_gib],
    ["activation", "activation", p.activation_gib],
    ["nontorch", "non-torch", p.non_torch_gib],
    ["context", "CUDA context (outside the budget)", p.cuda_context_gib],
    ["graphs", "CUDA graphs (" + (p.cudagraph_in_budget ? "inside" : "outside") + " the budget)", p.cudagraph_gib],
    ["kv", "KV cache", p.kv_cache_gib],
  ], p.total_gib, Math.max(p.unused_gib, 0));
}

// fitCard gives each part a width that never takes the bar past the card
// (what is left of it, in order) and adds the last part: "left unused",
// or "over the card" with what the parts need past it. A part keeps its
// own value for the legend; width is its share of the card.
function fitCard(parts, total, unused) {
  let left = Math.max(total, 0), over = 0;
  const out = parts.map(([part, label, x]) => {
    const shown = Math.min(Math.max(x, 0), left);
    left -= shown;
    over += Math.max(x, 0) - shown;
    return [part, label, x, shown];
  });
  over = Math.round(over * 100) / 100;
  out.push(over > 0 ? ["over", "over the card", over, 0] : ["unused", "left unused", unused, left]);
  return out;
}

function renderPlan(r) {
  const p = r.per_gpu, s = r.settings;
  $("result").hidden = false;
  const v = $("verdict");
  v.className = r.fits ? "fits" : "nofit";
  v.dataset.fits = String(r.fits);
  v.textContent = r.fits
    ? "Fits: vLLM starts and serves requests of " + thousands(s.max_model_len) + " tokens"
    : "Does not fit";
  $("summary").textContent = r.model.name + " on " + r.gpu.count + " × " + r.gpu.name + " (" + gib(p.total_gib) +
    " GiB each as CUDA reports it), vLLM " + s.vllm_version + ". KV cache: " + thousands(r.kv_cache_tokens) +
    " tokens in " + thousands(r.num_gpu_blocks) + " blocks, " + r.max_concurrency.toFixed(2) + " requests of " +
    thousands(s.max_model_len) + " tokens at once.";

  const bar = $("bar"), legend = $("legend");
  bar.replaceChildren();
  legend.replaceChildren();
  for (const [part, label, x, width] of barParts(p)) {
    const text = label + ": " + gib(x) + " GiB";
    if (width > 0) {
      const seg = el("div", { class: "seg " + part, role: "listitem", tabindex: "0", title: text, "aria-label": text, "data-part": part, "data-gib": gib(x) });
      seg.style.width = (100 * width / p.total_gib) + "%";
      bar.append(seg);
    }
    legend.append(el("li", { "data-part": part }, el("span", { class: "swatch " + part, "aria-hidden": "true" }),
      label.replace(/ \(.*/, "") + " ", el("span", { class: "gib", text: gib(x) }), " GiB"));
  }
  $("budget").textContent = "Budget " + gib(p.requested_gib) + " GiB = " + s.gpu_memory_utilization + " × " + gib(p.total_gib) +
    " GiB. Settings: tp " + s.tensor_parallel_size + ", pp " + s.pipeline_parallel_size + ", max-model-len " + s.max_model_len +
    ", max-num-seqs " + s.max_num_seqs + ", max-num-batched-tokens " + s.max_num_batched_tokens + ", dtype " + s.dtype +
    ", kv-cache-dtype " + s.kv_cache_dtype + ".";

  const band = r.kv_cache_tokens_band;
  $("band").textContent = (band.high > band.low
    ? "KV cache between " + thousands(band.low) + " and " + thousands(band.high) + " tokens (" + band.basis + "). "
    : "KV cache: " + band.basis + ". ") +
    "Profile run: " + (s.model_runner_v2 ? "Model Runner V2" : "V1 model runner") + ", dummy sampler's top-k/top-p " +
    s.sampler_path + " (vLLM " + s.vllm_version + ", " + s.vllm_install + " install).";
  $("evidence").tBodies[0].replaceChildren(...r.evidence.map((e) => el("tr", { "data-class": e.class },
    el("td", { text: TERM_NAMES[e.term] || e.term }),
    el("td", { class: e.class, text: e.class }),
    el("td", { text: gib(e.uncertainty_bytes / 2 ** 30) }),
    el("td", { text: e.class === "extrapolated" ? e.why : (e.calibrated_on || e.mechanism) }))));

  renderHost(r.host);
  renderFeatures(r.features || {});

  const findings = $("problems");
  findings.replaceChildren();
  for (const f of r.problems) findings.append(el("li", { class: "problem", text: f.message }));
  for (const f of r.warnings) findings.append(el("li", { class: "warning", text: f.message }));
  for (const a of r.alternatives || []) findings.append(el("li", { text: "would fit: " + a.message }));

  const rec = r.recommended;
  $("rec-flags").textContent = rec.max_model_len > 0 ? r.vllm_command : "No settings make this model fit on this GPU.";
  $("copy-button").disabled = !(rec.max_model_len > 0);
  $("copy-status").textContent = "";
  const why = $("why");
  why.replaceChildren(...rec.why.map((w) => el("li", { text: w })));
  const notes = $("notes");
  notes.replaceChildren(...(r.notes || []).map((n) => el("li", { text: "note: " + n })));
  drawFrontier(r);
}

// renderFeatures shows what the command's LoRA slots, drafter and
// multimodal limits add (plan -o json's features; the table's Features
// line), one item a feature, hidden when the command has none.
function renderFeatures(f) {
  const GiB = 2 ** 30;
  const items = [];
  if (f.lora) {
    items.push(el("li", { "data-feature": "lora", text: "LoRA " + f.lora.max_loras + " × rank " + f.lora.max_lora_rank + ": " + gib(f.lora.bytes / GiB) + " GiB in the weights" }));
  }
  const s = f.speculative;
  if (s) {
    let t = "speculative " + s.method + ", " + s.num_speculative_tokens + " tokens a step";
    if (s.draft) t += "; drafter " + s.draft + ": " + gib(s.weights_bytes / GiB) + " GiB of weights, " + s.kv_layers + " KV layers";
    if (s.forces_v1_runner) t += "; runs on the V1 model runner";
    items.push(el("li", { "data-feature": "speculative", text: t }));
  }
  const m = f.multimodal;
  if (m && m.text_only) {
    items.push(el("li", { "data-feature": "multimodal", text: "multimodal: text only, no encoder in the profile" }));
  } else if (m && m.encoder_items > 0) {
    items.push(el("li", { "data-feature": "multimodal", text: "multimodal: the profile's encoder pass on " + m.encoder_items + " dummy items peaks at " + gib(m.encoder_peak_bytes / GiB) + " GiB" }));
  }
  $("features").replaceChildren(...items);
  $("features").hidden = items.length === 0;
}

// renderHost shows the plan's host block (package host): the pod's memory
// limit first, then every term with how it is known.
function renderHost(h) {
  const GiB = 2 ** 30;
  $("host-summary").textContent = "Memory limit and request " + h.memory_limit + ": " + gib(h.serving_bytes / GiB) +
    " GiB held at most (" + gib(h.required_high_bytes / GiB) + " GiB at the sources' upper end), " +
    gib(h.loading_bytes / GiB) + " GiB while the weights load. " + (h.shm_needed
      ? "/dev/shm: " + gib(h.shm_bytes / GiB) + " GiB, so mount an emptyDir of medium Memory with sizeLimit " + h.shm_size_limit + " there."
      : "/dev/shm: the container's own 64 MiB is enough.");
  $("host-terms").tBodies[0].replaceChildren(...h.terms.map((t) => el("tr", { "data-term": t.term, "data-basis": t.basis },
    el("td", { text: t.term.replaceAll("_", " ") }),
    el("td", { text: gib(t.bytes / GiB) }),
    el("td", { text: gib(t.high_bytes / GiB) }),
    el("td", { text: t.phase }),
    el("td", { text: t.kind.replace("_", " ") + (t.reclaimable ? ", reclaimable" : "") + (t.shm ? ", /dev/shm" : "") }),
    el("td", { class: t.basis, text: t.basis, title: t.source }),
    el("td", { text: t.detail }))));
  $("host-findings").replaceChildren(...h.warnings.map((f) => el("li", { class: "warning", text: f.message })),
    ...h.notes.map((n) => el("li", { text: "note: " + n })));
}

// renderUpgrade shows `headroom plan --upgrade-to -o json`: the verdict
// first (what stops the deployment, or the KV cache lost past the allowed
// share), then both plans side by side and every changed term with the
// release boundaries that move it.
function renderUpgrade(u) {
  const a = u.from, b = u.to;
  $("upgrade").hidden = false;
  const v = $("upgrade-verdict");
  v.className = u.ok ? "fits" : "nofit";
  v.dataset.verdict = u.verdict;
  v.textContent = "Upgrade vLLM " + a.vllm_version + " → " + b.vllm_version + ": " + (u.ok ? "OK" : "BLOCKED") + ": " + u.why;
  $("upgrade-from-head").textContent = "vLLM " + a.vllm_version;
  $("upgrade-to-head").textContent = "vLLM " + b.vllm_version;
  const starts = (s) => s.fits ? "starts" : "does not start";
  const problem = (s) => s.fits || !s.problems.length ? "" : s.problems[0].message;
  const pct = (x) => (Math.round(x * 1000) / 10).toFixed(1) + "%";
  const row = (term, label, before, after, ...cause) => el("tr", { "data-term": term },
    el("th", { scope: "row", text: label }), el("td", { class: "before", text: before }), el("td", { class: "after", text: after }),
    el("td", { class: "cause" }, ...cause));
  const rows = [
    row("verdict", "verdict", starts(a), starts(b), problem(b) || problem(a)),
    row("kv_cache_tokens", "KV cache tokens", thousands(a.kv_cache_tokens), thousands(b.kv_cache_tokens),
      u.kv_loss > 0 ? pct(u.kv_loss) + " fewer (at most " + pct(u.max_kv_loss) + " allowed)" : pct(-u.kv_loss) + " more"),
    row("max_fit_model_len", "largest max-model-len", thousands(a.max_fit_model_len), thousands(b.max_fit_model_len)),
  ];
  for (const c of u.changes) {
    const causes = c.causes.map((x) => el("div", { text: x.since + " (" + x.rule + "): " + x.what + " [" + x.source + "]" }));
    if (c.unexplained) causes.push(el("div", { text: c.unexplained }));
    // The label is the CLI table's name of the term (memory.Change.Label).
    rows.push(row(c.term, c.label + (c.ours ? " (headroom's calibration, not vLLM)" : ""), c.from, c.to, ...causes));
  }
  $("upgrade-table").tBodies[0].replaceChildren(...rows);
  $("upgrade-findings").replaceChildren(
    ...u.remedies.map((m) => el("li", { text: "keep it: " + m.args.join(" ") + ": " + m.why })),
    ...u.new_warnings.map((f) => el("li", { class: "warning", text: "new on " + b.vllm_version + ": " + f.message })),
    ...(u.notes || []).map((n) => el("li", { text: "note: " + n })));
}

// drawFrontier plots the API's frontier: context (log2) against requests
// held at once (log10), with --max-num-seqs and max-model-len marked.
function drawFrontier(r) {
  const pts = r.frontier.filter((p) => p.concurrency > 0);
  const box = $("frontier");
  box.replaceChildren();
  if (!pts.length) {
    box.append(el("p", { class: "help", text: "The KV cache holds no request of any length." }));
    return;
  }
  // Drawn at the box's own width, so its text stays legible on a phone.
  const W = Math.max(340, Math.min(720, box.clientWidth || 720)), H = 300, L = 60, R = 16, T = 16, B = 44;
  const cap = r.settings.max_num_seqs;
  const xs = pts.map((p) => Math.log2(p.context_tokens));
  const ys = pts.map((p) => Math.log10(p.concurrency)).concat([Math.log10(Math.max(cap, 1)), 0]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  const y0 = Math.floor(Math.min(...ys, -0.3)), y1 = Math.ceil(Math.max(...ys));
  const X = (v) => L + (W - L - R) * (Math.log2(v) - x0) / (x1 - x0);
  const Y = (v) => T + (H - T - B) * (1 - (Math.log10(v) - y0) / (y1 - y0));
  const longest = pts.filter((p) => p.concurrency >= 1).pop();
  const g = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img",
    "aria-label": "Concurrency by context length: " + pts.map((p) => thousands(p.context_tokens) + " tokens, " + p.concurrency + " requests").join("; ") });
  g.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  g.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (let e = y0; e <= y1; e++) {
    const v = Math.pow(10, e);
    g.append(svg("line", { class: "axis", x1: L - 4, y1: Y(v), x2: L, y2: Y(v) }));
    g.append(svg("text", { x: L - 8, y: Y(v) + 4, "text-anchor": "end" }, v >= 1 ? thousands(v) : String(v)));
  }
  // Label the doubling lengths only: max-model-len and the longest fit
  // fall between them and have their own marks.
  for (const p of pts.filter((p) => (p.context_tokens & (p.context_tokens - 1)) === 0)) {
    const label = p.context_tokens >= 1024 ? Math.round(p.context_tokens / 1024) + "k" : String(p.context_tokens);
    g.append(svg("text", { x: X(p.context_tokens), y: H - B + 16, "text-anchor": "middle" }, label));
  }
  g.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "context (tokens per request)"));
  g.append(svg("text", { x: 14, y: (T + H - B) / 2, transform: "rotate(-90 14 " + (T + H - B) / 2 + ")", "text-anchor": "middle" }, "requests at once"));
  if (cap > 0) {
    g.append(svg("line", { class: "cap", x1: L, y1: Y(cap), x2: W - R, y2: Y(cap) }));
    g.append(svg("text", { x: W - R, y: Y(cap) - 5, "text-anchor": "end" }, "max-num-seqs " + cap));
  }
  const mml = r.settings.max_model_len;
  if (mml >= pts[0].context_tokens) {
    g.append(svg("line", { class: "mark", x1: X(mml), y1: T, x2: X(mml), y2: H - B }));
    g.append(svg("text", { x: X(mml) + 4, y: T + 10 }, "max-model-len"));
  }
  g.append(svg("polyline", { class: "curve", points: pts.map((p) => X(p.context_tokens) + "," + Y(p.concurrency)).join(" ") }));
  for (const p of pts) {
    const c = svg("circle", { class: p.concurrency < 1 ? "pt short" : "pt", cx: X(p.context_tokens), cy: Y(p.concurrency), r: 4 });
    c.append(svg("title", {}, thousands(p.context_tokens) + " tokens: " + p.concurrency + " requests at once" + (p.concurrency < 1 ? " (one request does not fit)" : "")));
    g.append(c);
  }
  box.append(g);
  if (longest) box.append(el("p", { class: "help", text: "Longest request that fits: " + thousands(r.max_fit_model_len) + " tokens." }));
}

// What the table says of a row's verdict, as plan --all-gpus does.
const STARTS = {
  fits: () => "yes",
  shorter: (row) => "at " + thousands(row.max_fit_model_len) + " tokens",
  does_not_start: () => "no",
};

function renderAllGPUs(rows, current) {
  const tb = $("all-gpus").tBodies[0];
  tb.replaceChildren();
  for (const row of rows) {
    const tr = el("tr", { class: row.gpu === current ? "current" : "" },
      el("th", { scope: "row", text: row.gpu }),
      el("td", { text: String(row.count) }),
      el("td", { text: gib(row.total_gib) }),
      el("td", { text: gib(row.gpus_total_gib) }),
      el("td", { class: row.verdict === "fits" ? "yes" : "no", text: STARTS[row.verdict](row) }),
      el("td", { text: thousands(row.max_fit_model_len) }),
      el("td", { text: thousands(row.kv_cache_tokens) }),
      el("td", { text: row.recommended_gpu_memory_utilization.toFixed(2) }),
      el("td", { text: row.problem_text || "" }));
    tb.append(tr);
  }
}

async function copyText(text, status) {
  try {
    await navigator.clipboard.writeText(text);
    $(status).textContent = "Copied.";
  } catch (e) {
    $(status).textContent = "Select the text and copy it (the browser refused: " + e.message + ").";
  }
}

// --- catalogs -----------------------------------------------------------

async function loadCatalogs() {
  try {
    const [models, gpus] = await Promise.all([api("/api/models"), api("/api/gpus")]);
    $("models-list").replaceChildren(...models.map((m) => el("option", { value: m.id })));
    const names = [];
    for (const d of gpus.devices) names.push([d.name, gib(d.total_bytes / 2 ** 30) + " GiB"]);
    for (const s of gpus.skus) names.push([s.name, s.cloud + ": " + s.count + " × " + s.device.name]);
    for (const d of gpus.mig) names.push([d.name, "MIG slice, " + gib(d.total_bytes / 2 ** 30) + " GiB"]);
    $("gpus-list").replaceChildren(...names.map(([v, l]) => el("option", { value: v, label: l })));
  } catch (e) {
    showError("form-error", "The catalogs did not load: " + e.message);
  }
}

// --- doctor and simulation ---------------------------------------------

function doctorBody() {
  const p = planBody();
  const body = { text: $("doctor-text").value };
  for (const k of ["model", "gpu", "gpu_count", "vllm_version", "command", "vllm_config", "flags"]) if (p[k] !== undefined) body[k] = p[k];
  return body;
}

async function diagnose() {
  showError("doctor-error", "");
  $("doctor-text").removeAttribute("aria-invalid");
  const out = $("doctor-result");
  out.replaceChildren();
  try {
    const d = await api("/api/doctor", doctorBody());
    if (!d.findings.length) out.append(el("p", { text: "Nothing wrong found in the evidence." }));
    d.findings.forEach((f, i) => {
      const box = el("div", { class: "finding", "data-code": f.code },
        el("h3", { text: (i + 1) + ". " + f.code + ": " + f.title }),
        el("p", { class: "help", text: "confidence " + f.confidence.toFixed(2) + " (" + f.confidence_level + ")" }),
        el("ul", {}, ...f.reasons.map((r) => el("li", { text: r }))));
      const rem = (f.remedies || []).map((r) => el("li", {}, r.args && r.args.length ? el("code", { text: r.args.join(" ") }) : null, (r.args && r.args.length ? ": " : "") + r.why));
      if (rem.length) box.append(el("p", { text: "Remedies:" }), el("ul", {}, ...rem));
      out.append(box);
    });
    if (d.suggested_command) out.append(el("p", { text: "Suggested: " }), el("pre", { text: d.suggested_command }));
    if (d.dead_ends && d.dead_ends.length) out.append(el("p", { text: "Dead ends:" }), el("ul", {}, ...d.dead_ends.map((x) => el("li", { text: x.message }))));
  } catch (e) {
    showError("doctor-error", e.message);
    $("doctor-text").setAttribute("aria-invalid", "true");
  }
}

async function simulate() {
  saveState();
  showError("sim-error", "");
  const out = $("sim-result");
  out.replaceChildren();
  const num = (id) => Number($(id).value.trim());
  const plan = planBody();
  delete plan.config;
  const body = {
    plan: plan, rate: num("sim-rate"), duration_s: num("sim-seconds"),
    prompt_tokens: num("sim-prompt"), output_tokens: num("sim-output"), endpoint: $("sim-endpoint").value,
  };
  if (num("sim-burst-count") > 0) body.bursts = [num("sim-burst-count") + "x" + num("sim-burst-tokens") + "@" + num("sim-burst-at") + "s"];
  try {
    drawSimulation(out, await api("/api/simulate", body));
  } catch (e) {
    showError("sim-error", e.message);
  }
}

// drawSimulation plots `headroom simulate -o json`'s series: the largest
// KV-cache use in each window (0-100%) and the requests waiting, over time.
function drawSimulation(box, r) {
  const s = r.series || [];
  const ms = (x) => (x / 1000).toFixed(2) + " s";
  box.append(el("p", { id: "sim-summary", text: r.requests + " requests, " + r.rejected + " rejected, " + r.preemptions +
    " preemptions; KV cache up to " + Math.round(r.max_kv_usage * 100) + "%, up to " + r.max_waiting + " waiting. Time to first token p50 " +
    ms(r.ttft_ms.p50) + ", p99 " + ms(r.ttft_ms.p99) + "; per output token p99 " + r.tpot_ms.p99.toFixed(1) + " ms." }));
  if (!s.length) return;
  const W = Math.max(340, Math.min(720, box.clientWidth || 720)), H = 260, L = 44, R = 44, T = 14, B = 40;
  const t1 = s[s.length - 1].start_s + r.window_s, q1 = Math.max(...s.map((p) => p.waiting), 1);
  const X = (t) => L + (W - L - R) * t / t1;
  const Yk = (u) => T + (H - T - B) * (1 - u);
  const Yq = (q) => T + (H - T - B) * (1 - q / q1);
  const mid = (p) => p.start_s + r.window_s / 2;
  const g = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img",
    "aria-label": "Over " + Math.round(t1) + " s: KV-cache use up to " + Math.round(r.max_kv_usage * 100) + "%, up to " + q1 + " requests waiting" });
  g.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  g.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  g.append(svg("line", { class: "axis", x1: W - R, y1: T, x2: W - R, y2: H - B }));
  for (const u of [0, 0.5, 1]) g.append(svg("text", { x: L - 6, y: Yk(u) + 4, "text-anchor": "end" }, Math.round(u * 100) + "%"));
  for (const q of [0, q1]) g.append(svg("text", { x: W - R + 6, y: Yq(q) + 4 }, String(q)));
  for (let i = 0; i <= 4; i++) g.append(svg("text", { x: X(t1 * i / 4), y: H - B + 16, "text-anchor": "middle" }, Math.round(t1 * i / 4) + " s"));
  g.append(svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, "KV-cache use (green, left) and requests waiting (orange, right)"));
  g.append(svg("polyline", { class: "curve", "data-series": "kv_usage", points: s.map((p) => X(mid(p)) + "," + Yk(p.kv_usage)).join(" ") }));
  g.append(svg("polyline", { class: "curve2", "data-series": "waiting", points: s.map((p) => X(mid(p)) + "," + Yq(p.waiting)).join(" ") }));
  box.append(g);
}

async function capacity() {
  saveState();
  showError("cap-error", "");
  const out = $("cap-result");
  out.replaceChildren();
  const num = (id) => Number($(id).value.trim());
  const plan = planBody();
  delete plan.config;
  delete plan.gpu;
  delete plan.gpu_memory;
  const seconds = num("cap-hours") * 3600;
  const body = {
    plan: plan, gpus: $("cap-gpus").value.split(",").map((g) => g.trim()).filter((g) => g),
    rate: num("cap-rate"), peak_rate: num("cap-peak"), period_s: seconds, duration_s: seconds, window_s: num("cap-window") * 60,
    prompt_tokens: num("cap-prompt"), output_tokens: num("cap-output"), slo: $("cap-slo").value.trim(),
    endpoint: $("cap-endpoint").value,
  };
  try {
    drawCapacity(out, await api("/api/capacity", body));
  } catch (e) {
    showError("cap-error", e.message);
  }
}

// drawCapacity shows `headroom capacity -o json`: a row per GPU option,
// cheapest first, and the best option's replicas per window against the
// arrival rate.
function drawCapacity(box, r) {
  const best = r.options[0];
  const usd = (v) => v ? "$" + v.toFixed(2) : "-";
  // The answer is the fleet handed over, the autoscaler replayed (as the
  // CLI's headline); each window's fewest replicas are the bound beside it.
  const a = best.autoscaler;
  box.append(el("p", { id: "cap-summary", text: r.best && a ? "Cheapest that meets the SLO: " + r.best + ", autoscaled from " + a.min_replicas + " to " +
    a.max_replicas + " replicas: SLO met in " + a.replay.windows_met + " of " + a.replay.windows + " windows, " + a.replay.gpu_hours.toFixed(1) +
    " GPU-hours, " + usd(a.replay.cost_usd) + " (each window's fewest replicas: " + best.gpu_hours.toFixed(1) + " GPU-hours, " + usd(best.cost_usd) + ")." :
    "No option meets the SLO." }));
  const rows = r.options.map((o) => el("tr", {},
    el("td", { text: o.gpu }), el("td", { text: o.slo_capacity_per_s ? o.slo_capacity_per_s + " req/s" : o.no_fit ? "does not fit" : "never met" }),
    el("td", { text: o.autoscaler ? o.autoscaler.min_replicas + "-" + o.autoscaler.max_replicas : "-" }),
    el("td", { text: o.autoscaler ? Math.round(o.autoscaler.replay.slo_attainment * 100) + "% (" + o.autoscaler.replay.windows_met + "/" + o.autoscaler.replay.windows + ")" : "-" }),
    el("td", { text: o.autoscaler ? o.autoscaler.replay.gpu_hours.toFixed(1) : "-" }),
    el("td", { text: o.autoscaler ? usd(o.autoscaler.replay.cost_usd) : "-" }),
    el("td", { text: o.met ? o.peak_replicas + " / " + o.mean_replicas + ", " + o.gpu_hours.toFixed(1) + " GPU-h" : "-" }),
    el("td", { text: o.static ? o.static.gpu_hours.toFixed(1) + " GPU-h" : "-" })));
  box.append(el("table", { id: "cap-table" }, el("thead", {}, el("tr", {}, ...["GPU", "SLO capacity", "autoscaled: replicas", "SLO met", "GPU-hours", "cost",
    "ideal: replicas peak / mean", "static for the peak"].map((h) => el("th", { text: h })))), el("tbody", {}, ...rows)));
  const w = best.windows || [];
  if (!w.length) return;
  const W = Math.max(340, Math.min(720, box.clientWidth || 720)), H = 260, L = 44, R = 44, T = 14, B = 40;
  const t1 = w[w.length - 1].start_s + r.window_s, q1 = Math.max(...w.map((p) => p.rate_per_s), 1);
  const n1 = Math.max(...w.map((p) => p.replicas), best.autoscaler ? best.autoscaler.replay.peak_replicas : 1, 1);
  const X = (t) => L + (W - L - R) * t / t1;
  const Yn = (n) => T + (H - T - B) * (1 - n / n1);
  const Yq = (q) => T + (H - T - B) * (1 - q / q1);
  const steps = (f) => w.flatMap((p) => [X(p.start_s) + "," + f(p), X(p.start_s + r.window_s) + "," + f(p)]).join(" ");
  const g = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img",
    "aria-label": best.gpu + ": up to " + n1 + " replicas for up to " + q1 + " requests per second" });
  g.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  g.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  g.append(svg("line", { class: "axis", x1: W - R, y1: T, x2: W - R, y2: H - B }));
  for (const n of [0, n1]) g.append(svg("text", { x: L - 6, y: Yn(n) + 4, "text-anchor": "end" }, String(n)));
  for (const q of [0, q1]) g.append(svg("text", { x: W - R + 6, y: Yq(q) + 4 }, q.toFixed(1)));
  for (let i = 0; i <= 4; i++) g.append(svg("text", { x: X(t1 * i / 4), y: H - B + 16, "text-anchor": "middle" }, (t1 * i / 4 / 3600).toFixed(1) + " h"));
  g.append(svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, "replicas of " + best.gpu + " (green, left) and requests per second (orange, right)"));
  g.append(svg("polyline", { class: "curve", "data-series": "replicas", points: steps((p) => Yn(p.replicas)) }));
  g.append(svg("polyline", { class: "curve2", "data-series": "rate", points: steps((p) => Yq(p.rate_per_s)) }));
  box.append(g);
}

// --- wiring -------------------------------------------------------------

function init() {
  $("plan-form").addEventListener("submit", (e) => { e.preventDefault(); plan(); });
  $("doctor-form").addEventListener("submit", (e) => { e.preventDefault(); diagnose(); });
  $("sim-form").addEventListener("submit", (e) => { e.preventDefault(); simulate(); });
  $("cap-form").addEventListener("submit", (e) => { e.preventDefault(); capacity(); });
  $("copy-button").addEventListener("click", () => copyText($("rec-flags").textContent, "copy-status"));
  $("share-button").addEventListener("click", () => { saveState(); copyText(location.href, "share-status"); });
  $("config").addEventListener("change", async () => {
    const f = $("config").files[0];
    uploadedConfig = null;
    $("config-status").textContent = "";
    if (!f) return;
    if (f.size > 512 * 1024) { $("config-status").textContent = f.name + " is over 512 KiB: is it config.json?"; return; }
    uploadedConfig = await f.text();
    $("config-status").textContent = f.name + " loaded; the model field names it. An uploaded file is not part of the link.";
  });
  window.addEventListener("hashchange", () => { if (loadState()) plan(); });
  loadCatalogs();
  if (loadState()) plan();
}

init();
