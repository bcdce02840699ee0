// tests/integration/dashboard/fake_server.mjs — a static stand-in for
// foliod's read-only endpoints, to test the dashboard page at sizes a real
// daemon on this machine cannot reach quickly (100,000 blocks).
//
//   node fake_server.mjs PORT DASHBOARD.html NUM_BLOCKS [--frozen]
//
// Serves /dashboard (the page file), /v1/kv (the schema of daemon/server.c
// srv_kv_render), /metrics (the folio_* names the page reads) and
// /v1/models.  The block map is a pure function of (NUM_BLOCKS, tick):
// three tenants own runs of blocks, some shared, some cached; tick advances
// once a second unless --frozen, so a test can recompute exactly what the
// page must draw.  Prints "READY" once listening.
import http from "node:http";
import fs from "node:fs";

const [port, page, nbArg] = process.argv.slice(2);
const frozen = process.argv.includes("--frozen");
const NB = parseInt(nbArg, 10);
const BS = 16;
const t0 = Date.now();
const tick = () => (frozen ? 0 : Math.floor((Date.now() - t0) / 1000));

// deterministic per-block state
function blockAt(i, k) {
  const h = ((i * 2654435761) ^ (k * 40503)) >>> 0;
  const region = Math.floor((i / NB) * 10);
  if (region < 6) {
    if (h % 10 < 8) {
      const tenant = region % 3;
      return {state: "used", seq: 1000 + Math.floor(i / 37), tenant, refcount: h % 23 === 0 ? 2 : 1,
              tokens: h % 7 === 0 ? h % BS : BS};
    }
    return {state: "cached", seq: 500 + (i % 11), tenant: 0, refcount: 0, tokens: BS};
  }
  if (region < 8) return {state: "cached", seq: 600 + (i % 5), tenant: 1, refcount: 0, tokens: BS};
  return {state: "free", seq: 0, tenant: 0, refcount: 0, tokens: 0};
}

function kvJson() {
  const k = tick();
  const map = new Array(NB);
  let used = 0, cached = 0, free = 0, tokens = 0, empty = 0;
  const tb = [0, 0, 0];
  for (let i = 0; i < NB; i++) {
    const b = blockAt(i, k);
    map[i] = b;
    if (b.state === "used") { used++; tb[b.tenant]++; tokens += b.tokens; empty += BS - b.tokens; }
    else if (b.state === "cached") cached++;
    else free++;
  }
  return JSON.stringify({
    block_size: BS, num_blocks: NB, bytes_per_block: 8192 * BS, dtype: "f32",
    blocks: {free, used, cached}, tokens_held: tokens, slots_empty: empty,
    requests: {running: 12, waiting: 3 + (k % 4), preempted: k % 2}, preemptions_total: 5 + k,
    prefix_cache: {queries: 1000 + 10 * k, hits: 400 + 3 * k},
    tenants: ["default", "alice", "bob"].map((name, t) =>
      ({name, blocks_used: tb[t], running: 4, waiting: 1, max_kv_blocks: t === 2 ? 5000 : 0})),
    block_map: compact(map),
  }) + "\n";
}

/* foliod's compact block map (char-per-block-v2, daemon/README.md). */
function compact(map) {
  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  let states = "";
  const shared = [], partial = [];
  map.forEach((b, i) => {
    states += b.state === "free" ? "." : b.state === "cached" ? ":"
      : b.tenant < 64 ? B64[b.tenant] : "~" + B64[b.tenant >> 6] + B64[b.tenant & 63];
    if (b.state === "used" && b.refcount > 1) {
      const last = shared[shared.length - 1];
      if (last && last[0] + last[1] === i) last[1]++; else shared.push([i, 1]);
    }
    if (b.state === "used" && b.tokens < BS) partial.push([i, b.tokens]);
  });
  return {encoding: "char-per-block-v2", states, shared, partial};
}

function metrics() {
  const k = tick();
  const lines = [];
  const fam = (n, t) => lines.push(`# HELP ${n} x`, `# TYPE ${n} ${t}`);
  fam("folio_prompt_tokens_total", "counter");
  lines.push(`folio_prompt_tokens_total ${2000 * k}`);
  fam("folio_generation_tokens_total", "counter");
  lines.push(`folio_generation_tokens_total ${150 * k}`);
  const hist = (n, bounds, per) => {
    fam(n, "histogram");
    let c = 0;
    bounds.forEach((b, i) => { c += per[i] * (k + 1); lines.push(`${n}_bucket{le="${b}"} ${c}`); });
    lines.push(`${n}_bucket{le="+Inf"} ${c}`, `${n}_sum ${c * 0.05}`, `${n}_count ${c}`);
  };
  hist("folio_time_to_first_token_seconds", [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1], [0, 2, 10, 20, 6, 2, 0]);
  hist("folio_inter_token_latency_seconds", [0.005, 0.01, 0.02, 0.04, 0.08], [10, 60, 25, 4, 1]);
  for (const [n, v] of [["folio_tenant_prompt_tokens_total", 700], ["folio_tenant_generation_tokens_total", 50]]) {
    fam(n, "counter");
    for (const t of ["default", "alice", "bob"]) lines.push(`${n}{tenant="${t}"} ${v * k}`);
  }
  return lines.join("\n") + "\n";
}

http.createServer((req, res) => {
  const path = req.url.split("?")[0];
  const send = (ctype, body) => { res.writeHead(200, {"Content-Type": ctype}); res.end(body); };
  if (path === "/dashboard") send("text/html; charset=utf-8", fs.readFileSync(page));
  else if (path === "/v1/kv") send("application/json", kvJson());
  else if (path === "/metrics") send("text/plain; version=0.0.4; charset=utf-8", metrics());
  else if (path === "/v1/models")
    send("application/json", JSON.stringify({object: "list", data: [{id: "fake-model", max_model_len: 2048}]}));
  else { res.writeHead(404); res.end("{}"); }
}).listen(+port, "127.0.0.1", () => console.log("READY"));
