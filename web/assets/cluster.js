// headroom's cluster page: it draws /api/audit, the report `headroom audit
// --live -o json` prints, as it comes: the workloads in the audit's order,
// whatever their kind. It computes no verdict and no memory number of its
// own; it only turns bytes into GiB and parts of the card into widths.
"use strict";

const GiB = 1 << 30;
const REFRESH_MS = 30000;

function gib(bytes) { return (bytes / GiB).toFixed(2); }
function pct(x) { return Math.round(100 * x) + "%"; }

const STATUS_TEXT = { will_not_start: "will not start", at_risk: "at risk", not_checked: "not checked", ok: "ok" };

// The card's parts, in the order `headroom plan` draws them, non-torch
// and the CUDA context apart; each is drawn only up to the card's edge.
function cardParts(e) {
  const p = e.per_gpu;
  let left = Math.max(p.total_bytes, 0);
  const parts = [
    ["weights", "weights", p.weights_bytes],
    ["activation", "activation", p.activation_bytes],
    ["nontorch", "non-torch", p.non_torch_bytes],
    ["context", "CUDA context", p.context_bytes],
    ["graphs", "CUDA graphs (" + (e.cudagraph_in_budget ? "inside" : "outside") + " the budget)", p.cudagraph_bytes],
    ["kv", "KV cache", p.kv_cache_bytes],
  ].map(([part, label, bytes]) => {
    const shown = Math.min(Math.max(bytes, 0), left);
    left -= shown;
    return [part, label, bytes, shown];
  });
  parts.push(["unused", "left unused", Math.max(e.unused_bytes, 0), left]);
  return parts;
}

function card(e) {
  const total = e.per_gpu.total_bytes;
  const bar = el("div", { class: "bar small", role: "list", "aria-label": "one GPU's plan: " + gib(total) + " GiB" });
  for (const [part, label, bytes, shown] of cardParts(e)) {
    if (shown <= 0 || total <= 0) continue;
    const text = label + ": " + gib(bytes) + " GiB";
    const seg = el("div", { class: "seg " + part, role: "listitem", tabindex: "0", title: text, "aria-label": text, "data-part": part, "data-gib": gib(bytes) });
    seg.style.width = (100 * shown / total) + "%";
    bar.append(seg);
  }
  return bar;
}

function engine(e) {
  const who = (e.container ? e.container + ": " : "") + e.model + " on " + e.gpu_count + " × " + e.gpu;
  return el("div", { class: "engine" },
    el("p", { class: "engine-line" }, el("strong", { text: who }),
      " (" + gib(e.per_gpu.total_bytes) + " GiB each; GPU from " + e.gpu_from + "). " +
      (e.fits ? "KV cache " + Number(e.kv_cache_tokens).toLocaleString("en-US") + " tokens, " + e.max_concurrency.toFixed(2) +
        " requests of " + Number(e.max_model_len).toLocaleString("en-US") + " tokens at once." : "Does not fit.")),
    card(e));
}

function pod(p) {
  const li = el("li", { class: "pod", "data-pod": p.name },
    el("span", { class: "pod-name", text: p.name }),
    " " + (p.phase || "") + (p.restarts ? ", " + p.restarts + " restarts" + (p.last_termination ? " (last: " + p.last_termination + ")" : "") : ""));
  if (p.metrics) {
    const kv = p.metrics.kv_cache_usage;
    const meter = el("span", { class: "kv-live", role: "meter", "aria-valuemin": "0", "aria-valuemax": "1", "aria-valuenow": String(kv),
      "aria-label": "KV cache " + pct(kv) + " used", "data-kv": String(kv), title: "KV cache " + pct(kv) + " used" },
      el("span", { class: "kv-fill" }));
    meter.firstChild.style.width = (100 * Math.min(kv, 1)) + "%";
    li.append(" ", meter, " KV " + pct(kv) + ", " + p.metrics.num_requests_running + " running, " + p.metrics.num_requests_waiting + " waiting");
  } else if (p.metrics_error) {
    li.append(el("span", { class: "help", text: " (live metrics not read: " + p.metrics_error + ")" }));
  }
  return li;
}

function workload(w) {
  const art = el("article", { class: "workload " + w.status, "data-kind": w.kind, "data-namespace": w.namespace, "data-name": w.name, "data-status": w.status },
    el("h2", {}, el("span", { class: "status " + w.status, text: STATUS_TEXT[w.status] || w.status }), " " + w.kind + " " + w.namespace + "/" + w.name));
  for (const e of w.engines || []) art.append(engine(e));
  const worst = w.findings.filter((f) => f.level !== "info");
  if (worst.length) {
    art.append(el("p", { class: "fix" }, el("strong", { text: "Fix: " }), worst[0].message));
  }
  if (w.findings.length) {
    const ul = el("ul", { class: "findings" });
    for (const f of w.findings) {
      ul.append(el("li", { class: f.level, "data-code": f.code }, el("code", { text: f.code }), " " + f.message));
    }
    art.append(ul);
  }
  if ((w.pods || []).length) {
    const ul = el("ul", { class: "pods" });
    for (const p of w.pods) ul.append(pod(p));
    art.append(ul);
  }
  return art;
}

function render(r) {
  const s = r.summary;
  $("scope").textContent = "Audited " + r.scope + " at " + new Date().toLocaleTimeString() + ".";
  $("summary").textContent = s.workloads + " vLLM workloads: " + s.will_not_start + " will not start, " + s.at_risk +
    " at risk, " + s.not_checked + " not checked, " + s.ok + " ok.";
  const cf = $("cluster-findings");
  cf.replaceChildren(...(r.cluster || []).map((f) => el("li", { class: f.level, "data-code": f.code }, el("code", { text: f.code }), " " + f.message)));
  $("workloads").replaceChildren(...r.workloads.map(workload));
  document.body.dataset.loaded = "true";
}

async function load() {
  $("refresh").disabled = true;
  try {
    const resp = await fetch("api/audit", { headers: { Accept: "application/json" } });
    const body = await resp.json();
    if (!resp.ok) throw new Error(body.error || resp.statusText);
    $("cluster-error").hidden = true;
    render(body);
  } catch (e) {
    $("cluster-error").textContent = e.message;
    $("cluster-error").hidden = false;
  } finally {
    $("refresh").disabled = false;
  }
}

$("refresh").addEventListener("click", load);
load();
setInterval(load, REFRESH_MS);
