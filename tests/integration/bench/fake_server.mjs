// tests/integration/bench/fake_server.mjs — a small OpenAI-compatible
// streaming server (Node, no dependencies) for `folio bench` tests.
//
//   node fake_server.mjs --socket PATH --port-file FILE [options]
//
// Listens on the Unix socket PATH and on 127.0.0.1 at a random TCP port
// (written to FILE).  Behaviour, counted in arrival order over both
// listeners (request n = 1, 2, ...):
//   n % fail429 == 0          429 with an OpenAI error object
//   else n % drop == 0        starts streaming, then destroys the socket
//                             after one token (a mid-stream failure)
//   else                      streams exactly `tokens` tokens (or the
//                             request's max_tokens if --tokens 0), one per
//                             SSE chunk, the first after `first-ms`, the
//                             rest every `itl-ms`; usage in a final chunk
//                             when stream_options.include_usage is set
// GET /v1/models, GET /metrics (folio_* names, or vllm:* with --vllm),
// GET /stats (what it did, as JSON).  SIGTERM exits.
import http from 'node:http';
import fs from 'node:fs';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]?.startsWith('--') || all[i + 1] === undefined ? '1' : all[i + 1]]);
    return acc;
  }, []));
const tokens = +(args.tokens ?? 16);
const firstMs = +(args['first-ms'] ?? 50);
const itlMs = +(args['itl-ms'] ?? 10);
const fail429 = +(args.fail429 ?? 0);
const drop = +(args.drop ?? 0);
const vllm = !!args.vllm;
const noTokenIds = !!args['no-token-ids'];

const stats = { requests: 0, ok: 0, r429: 0, dropped: 0, tokens: 0, bad: 0, auth: {}, maxInflight: 0, scrapes: 0, bodies: [] };
let inflight = 0;

function metrics() {
  if (vllm)
    return `# HELP vllm:gpu_cache_usage_perc x\n# TYPE vllm:gpu_cache_usage_perc gauge\n` +
      `vllm:gpu_cache_usage_perc{model_name="fake"} ${Math.min(1, inflight / 10)}\n` +
      `vllm:num_requests_running{model_name="fake"} ${inflight}\n` +
      `vllm:num_requests_waiting{model_name="fake"} 0\n`;
  return `# HELP folio_kv_cache_usage_ratio Fraction of KV blocks in use (0..1).\n` +
    `# TYPE folio_kv_cache_usage_ratio gauge\nfolio_kv_cache_usage_ratio ${Math.min(1, inflight / 10)}\n` +
    `folio_num_requests_running ${inflight}\nfolio_num_requests_waiting 0\n` +
    `folio_num_preemptions_total 0\nfolio_kv_blocks_used ${inflight * 2}\nfolio_kv_num_blocks 20\n` +
    `folio_tenant_requests_running{tenant="a \\"quoted\\" {name}"} 1\n`;
}

function handler(req, res) {
  let body = '';
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake-model', object: 'model', vocab_size: 500, max_model_len: 4096 }] }));
      return;
    }
    if (req.method === 'GET' && req.url === '/metrics') {
      stats.scrapes++;
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' });
      res.end(metrics());
      return;
    }
    if (req.method === 'GET' && req.url === '/stats') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(stats));
      return;
    }
    if (req.method !== 'POST' || !/^\/v1\/(chat\/)?completions$/.test(req.url)) {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end('{"error":{"message":"not found","type":"NotFound","param":null,"code":404}}');
      return;
    }
    const chat = req.url.includes('chat');
    let p;
    try { p = JSON.parse(body); } catch { stats.bad++; res.writeHead(400); res.end('{"error":{"message":"bad json"}}'); return; }
    const n = ++stats.requests;
    const auth = req.headers.authorization || 'none';
    stats.auth[auth] = (stats.auth[auth] || 0) + 1;
    if (stats.bodies.length < 3) stats.bodies.push(p);
    if (fail429 && n % fail429 === 0) {
      stats.r429++;
      res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '1' });
      res.end('{"error":{"message":"tenant queue full (fake)","type":"rate_limit_error","param":null,"code":"tenant_queue_full"}}');
      return;
    }
    const want = tokens > 0 ? tokens : p.max_tokens;
    const dropThis = drop && n % drop === 0;
    const usage = p.stream_options && p.stream_options.include_usage;
    inflight++;
    stats.maxInflight = Math.max(stats.maxInflight, inflight);
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    let sent = 0;
    let done = false;
    const finish = () => { if (!done) { done = true; inflight--; } };
    res.on('close', finish);
    const chunk = () => {
      if (res.destroyed) return;
      sent++;
      stats.tokens++;
      const last = sent === want;
      let c;
      if (chat)
        c = { id: 'x', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: `w${sent} ` }, finish_reason: last ? 'length' : null }] };
      else {
        c = { id: 'x', object: 'text_completion', choices: [{ index: 0, text: `w${sent} "text": `, logprobs: null, finish_reason: last ? 'length' : null }] };
        if (!noTokenIds) c.choices[0].token_ids = [sent];
      }
      res.write(`data: ${JSON.stringify(c)}\n\n`);
      if (dropThis) {
        stats.dropped++;
        setTimeout(() => { req.socket.destroy(); finish(); }, 5);
        return;
      }
      if (!last) { setTimeout(chunk, itlMs); return; }
      if (usage) res.write(`data: ${JSON.stringify({ id: 'x', choices: [], usage: { prompt_tokens: Array.isArray(p.prompt) ? p.prompt.length : 7, completion_tokens: want, total_tokens: want + 7 } })}\n\n`);
      res.write('data: [DONE]\n\n');
      res.end();
      stats.ok++;
      finish();
    };
    if (chat) res.write(`data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`);
    setTimeout(chunk, firstMs);
  });
}

const sock = args.socket;
if (sock && fs.existsSync(sock)) fs.unlinkSync(sock);
const s1 = http.createServer(handler);
const s2 = http.createServer(handler);
s1.maxConnections = 10000;
s2.maxConnections = 10000;
let ready = 0;
const up = () => { if (++ready === 2 && args['port-file']) fs.writeFileSync(args['port-file'], String(s2.address().port)); };
s1.listen(sock, up);
s2.listen(0, '127.0.0.1', up);
process.on('SIGTERM', () => { s1.close(); s2.close(); process.exit(0); });
setTimeout(() => process.exit(3), +(args.lifetime ?? 300) * 1000).unref();
