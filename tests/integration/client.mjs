// tests/integration/client.mjs — scenarios that need many concurrent
// clients (node, no dependencies).  Usage: node client.mjs SCENARIO SOCKET [ARGS]
// Exits 0 on success; prints "FAIL: ..." and exits 1 otherwise.
import http from 'node:http';
import net from 'node:net';

const [scenario, sock, ...args] = process.argv.slice(2);
const fail = (msg) => { console.error('FAIL: ' + msg); process.exit(1); };
const ok = (msg) => console.log('ok - ' + msg);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });

function request(method, path, body, opts = {}) {
  return new Promise((resolve, reject) => {
    const headers = { 'content-type': 'application/json', ...(opts.headers || {}) };
    const o = opts.tcp ? { host: opts.tcp.host, port: opts.tcp.port } : { socketPath: sock };
    const req = http.request({ ...o, method, path, headers, agent: opts.agent || agent }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { data += d; if (opts.onData) opts.onData(d, res, req); });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body !== undefined) req.end(typeof body === 'string' ? body : JSON.stringify(body));
    else req.end();
  });
}

// Parses an SSE body into { tokens: {index: [...]}, text: {index: str}, finish: {...}, done, usage }
function parseSSE(body) {
  const out = { tokens: {}, text: {}, finish: {}, done: false, usage: null };
  for (const ev of body.split('\n\n')) {
    if (!ev.startsWith('data: ')) continue;
    const d = ev.slice(6);
    if (d === '[DONE]') { out.done = true; continue; }
    const j = JSON.parse(d);
    if (j.usage) out.usage = j.usage;
    for (const c of j.choices) {
      (out.tokens[c.index] ||= []).push(...c.token_ids);
      out.text[c.index] = (out.text[c.index] || '') + c.text;
      if (c.finish_reason) out.finish[c.index] = c.finish_reason;
    }
  }
  return out;
}

async function stream(body, opts) {
  const r = await request('POST', '/v1/completions', { ...body, stream: true }, opts);
  if (r.status !== 200) throw new Error(`status ${r.status}: ${r.body}`);
  return parseSSE(r.body);
}

async function kv() {
  return JSON.parse((await request('GET', '/v1/kv')).body);
}

async function waitIdle(ms = 10000) {
  const t0 = Date.now();
  for (;;) {
    const k = await kv();
    if (k.requests.running === 0 && k.requests.waiting === 0) return k;
    if (Date.now() - t0 > ms) fail('engine did not become idle: ' + JSON.stringify(k.requests));
    await new Promise((r) => setTimeout(r, 50));
  }
}

let VOCAB = 512;
const prompt = (i, len = 12) => Array.from({ length: len }, (_, k) => (i * 31 + k * 7) % (VOCAB - 3) + 3);

const scenarios = {
  // N concurrent streams, each with its own max_tokens; counts must match.
  async concurrent() {
    const n = Number(args[0] || 64);
    const rs = await Promise.all(Array.from({ length: n }, (_, i) =>
      stream({ prompt: prompt(i), max_tokens: 5 + (i % 20), temperature: 0, ignore_eos: true })));
    rs.forEach((r, i) => {
      if (!r.done) fail(`stream ${i} has no [DONE]`);
      if (r.tokens[0].length !== 5 + (i % 20)) fail(`stream ${i}: ${r.tokens[0].length} tokens`);
      if (r.finish[0] !== 'length') fail(`stream ${i}: finish ${r.finish[0]}`);
    });
    ok(`${n} concurrent streams, right token counts`);
  },

  // Each of N concurrent streams equals the same request run alone.
  async preempt() {
    const n = Number(args[0] || 32), temperature = Number(args[1] ?? 0.7);
    const body = (i) => ({ prompt: prompt(i, 20), max_tokens: 40, temperature, seed: i, ignore_eos: true });
    const alone = [];
    for (let i = 0; i < n; i++) alone.push(await stream(body(i)));
    const before = await metric('folio_num_preemptions_total');
    const together = await Promise.all(Array.from({ length: n }, (_, i) => stream(body(i))));
    const after = await metric('folio_num_preemptions_total');
    for (let i = 0; i < n; i++) {
      if (JSON.stringify(alone[i].tokens) !== JSON.stringify(together[i].tokens))
        fail(`stream ${i} differs under load`);
      if (alone[i].text[0] !== together[i].text[0]) fail(`stream ${i} text differs`);
    }
    if (!(after > before)) fail(`no preemption happened (${before} -> ${after}); pool too big?`);
    ok(`${n} concurrent streams identical to alone, ${after - before} preemptions`);
    const k = await waitIdle();
    if (k.blocks.used !== 0) fail(`used blocks after idle: ${k.blocks.used}`);
  },

  // N clients disconnect mid-stream; then no block is used.
  async disconnect() {
    const n = Number(args[0] || 200);
    let cut = 0;
    await Promise.all(Array.from({ length: n }, (_, i) => new Promise((resolve) => {
      const a = new http.Agent({ keepAlive: false });
      const req = http.request({ socketPath: sock, method: 'POST', path: '/v1/completions', agent: a },
        (res) => {
          let got = 0;
          res.on('data', () => { if (++got === 2) { cut++; req.destroy(); resolve(); } });
          res.on('end', resolve);
          res.on('error', resolve);
        });
      req.on('error', resolve);
      req.end(JSON.stringify({ prompt: prompt(i), max_tokens: 500, stream: true, ignore_eos: true }));
    })));
    if (cut < n * 0.9) fail(`only ${cut}/${n} clients cut mid-stream`);
    const k = await waitIdle();
    if (k.blocks.used !== 0) fail(`${k.blocks.used} blocks still used after disconnects`);
    // compact map: '.' free, ':' cached, any other character a used block
    const usedInMap = [...k.block_map.states].filter((c) => c !== '.' && c !== ':').length;
    if (usedInMap !== 0) fail(`block map shows ${usedInMap} used blocks`);
    ok(`${cut} clients disconnected mid-stream; /v1/kv: 0 used, ${k.blocks.cached} cached, ${k.blocks.free} free`);
  },

  // Many malformed requests, each answered 4xx, while a good stream finishes.
  async hostile() {
    const good = stream({ prompt: prompt(1), max_tokens: 200, temperature: 0, ignore_eos: true });
    const bodies = [
      '{', '[]', 'null', '"str"', '{"prompt":', '{"prompt":[1,2,3],}', '{"prompt":[1,2,3]} trailing',
      '{"prompt":[]}', '{"prompt":{}}', '{"prompt":[1,"a"]}', '{"prompt":[1.5]}', '{"prompt":[-1]}',
      '{"prompt":[99999999]}', '{"prompt":[1],"max_tokens":-1}', '{"prompt":[1],"max_tokens":0}',
      '{"prompt":[1],"max_tokens":1e300}', '{"prompt":[1],"max_tokens":"5"}', '{"prompt":[1],"max_tokens":2.5}',
      '{"prompt":[1],"temperature":-1}', '{"prompt":[1],"temperature":"hot"}', '{"prompt":[1],"top_p":0}',
      '{"prompt":[1],"top_p":1.5}', '{"prompt":[1],"top_k":-5}', '{"prompt":[1],"n":0}', '{"prompt":[1],"n":1000}',
      '{"prompt":[1],"seed":1e30}', '{"prompt":[1],"stop":5}', '{"prompt":[1],"stop":["a","b","c","d","e"]}',
      '{"prompt":[1],"stop":[""]}', '{"prompt":[1],"logit_bias":{"x":1}}', '{"prompt":[1],"logit_bias":{"5":1000}}',
      '{"prompt":[1],"stream":"yes"}', '{"prompt":[1],"min_p":2}', '{"prompt":[1],"stream_options":{"include_usage":true}}',
      '{"prompt":[1],"model":"other"}', '{"prompt":[1],"echo":1}', '{"prompt":[1],"logprobs":21}',
      ...(args[0] === 'tokenizer' ? ['{"prompt":"x","max_tokens":5000}'] : ['{"prompt":"text prompt"}']),
      '{"prompt":[1],"max_tokens":1000000}', '{"prompt":[1]' + ',"min_p":5'.repeat(10) + '}',
      '['.repeat(5000) + ']'.repeat(5000), '{"prompt":[1],"ignore_eos":1}',
    ];
    let n4 = 0;
    const rs = await Promise.all(bodies.map((b) => request('POST', '/v1/completions', b)));
    rs.forEach((r, i) => {
      if (r.status < 400 || r.status >= 500) fail(`body ${i} (${bodies[i].slice(0, 40)}) -> ${r.status} ${r.body}`);
      const e = JSON.parse(r.body).error;
      if (!e || typeof e.message !== 'string' || !('type' in e) || !('param' in e) || !('code' in e))
        fail(`body ${i}: bad error object ${r.body}`);
      n4++;
    });
    // raw-socket hostility: bad UTF-8, oversized body, truncated, pipelined garbage, bad routes
    const raw = [
      ['bad utf-8', Buffer.concat([Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 18\r\n\r\n{"prompt":"\xff\xfe"}', 'latin1')]), 400],
      ['oversized body', Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${64 << 20}\r\n\r\n{`), 413],
      ['chunked oversized', Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n' + ('100000\r\n' + 'a'.repeat(0x100000) + '\r\n').repeat(2)), 413],
      ['truncated request line', Buffer.from('POST /v1/compl'), 400],
      ['truncated body', Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"prompt":'), 400],
      ['garbage', Buffer.from('\x00\x01\x02 garbage \r\n\r\n'), 400],
      ['pipelined garbage', Buffer.from('GET /health HTTP/1.1\r\nHost: x\r\n\r\nBLAH BLAH\r\n\r\n'), 200, 400],
      ['bad version', Buffer.from('GET /health HTTP/9.9\r\n\r\n'), 400],
      ['bad header', Buffer.from('GET /health HTTP/1.1\r\nBad Header\r\n\r\n'), 400],
      ['huge header', Buffer.from('GET /health HTTP/1.1\r\nX-A: ' + 'a'.repeat(70000) + '\r\n\r\n'), 431],
      ['huge url', Buffer.from('GET /' + 'a'.repeat(9000) + ' HTTP/1.1\r\n\r\n'), 414],
      ['unknown route', Buffer.from('GET /v2/nothing HTTP/1.1\r\nHost: x\r\n\r\n'), 404],
      ['wrong method', Buffer.from('DELETE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'), 405],
      ['bad content-length', Buffer.from('POST /v1/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n'), 400],
      ['two content-lengths', Buffer.from('POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}'), 400],
    ];
    for (const [name, bytes, ...want] of raw) {
      const got = await rawExchange(bytes);
      const codes = [...got.matchAll(/HTTP\/1\.1 (\d\d\d)/g)].map((m) => Number(m[1]));
      if (JSON.stringify(codes) !== JSON.stringify(want)) fail(`${name}: got ${codes} want ${want}`);
      n4++;
    }
    // a body refused while more of it is in flight: the answer must survive
    // the rest arriving (a daemon that closed at once reset the connection,
    // and the client lost the 413 in 2-53% of these exchanges, by run)
    for (let i = 0; i < 20; i++) {
      const got = await rawExchange(raw[2][1]);
      if (!/^HTTP\/1\.1 413 /.test(got)) fail(`chunked oversized, again (${i}): got ${JSON.stringify(got.slice(0, 40))}`);
      n4++;
    }
    const g = await good;
    if (!g.done || g.tokens[0].length !== 200) fail(`good stream disturbed: ${g.tokens[0]?.length} tokens`);
    const alone = await stream({ prompt: prompt(1), max_tokens: 200, temperature: 0, ignore_eos: true });
    if (JSON.stringify(alone.tokens) !== JSON.stringify(g.tokens)) fail('good stream content changed');
    const h = await request('GET', '/health');
    if (h.status !== 200) fail('daemon unhealthy after hostile requests');
    ok(`${n4} hostile requests answered 4xx; concurrent stream untouched`);
  },

  // /health and /metrics answer while a (slow) step runs.
  async responsive() {
    const s = stream({ prompt: prompt(3), max_tokens: 3, temperature: 0 });
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    const h = await request('GET', '/health');
    const m = await request('GET', '/metrics');
    const dt = Date.now() - t0;
    if (h.status !== 200 || m.status !== 200) fail('health/metrics during step');
    if (!/folio_num_requests_running(\{[^}]*\})? 1\n/.test(m.body)) fail('request not running during step');
    await s;
    ok(`/health and /metrics answered in ${dt} ms during a long step`);
  },

  // A client that does not read: the daemon drops it once its cap is exceeded.
  async slowreader() {
    const c = net.connect(sock);
    await new Promise((r) => c.on('connect', r));
    c.pause();
    const body = JSON.stringify({ prompt: prompt(4), max_tokens: 2000, stream: true, ignore_eos: true, n: 16 });
    c.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    const t0 = Date.now();
    for (;;) {
      const m = (await request('GET', '/metrics')).body;
      if (/folio_slow_reader_drops_total(\{[^}]*\})? [1-9]/.test(m)) break;
      if (Date.now() - t0 > 60000) fail('slow reader never dropped');
      await new Promise((r) => setTimeout(r, 100));
    }
    c.destroy();
    const k = await waitIdle();
    if (k.blocks.used) fail('blocks used after slow reader dropped');
    ok('slow reader dropped after its pending-output cap; its request aborted');
  },

  // Two tenants on TCP by API key: metrics separated, 429 over max_waiting.
  async tenants() {
    const [host, port] = [args[0], Number(args[1])];
    const A = { tcp: { host, port }, headers: { authorization: 'Bearer key-a' } };
    const B = { tcp: { host, port }, headers: { authorization: 'Bearer key-b' } };
    const noKey = await request('POST', '/v1/completions', { prompt: [1] }, { tcp: { host, port } });
    if (noKey.status !== 401) fail(`no key -> ${noKey.status}`);
    const badKey = await request('POST', '/v1/completions', { prompt: [1] }, { tcp: { host, port }, headers: { authorization: 'Bearer nope' } });
    if (badKey.status !== 401) fail(`bad key -> ${badKey.status}`);
    await stream({ prompt: prompt(5), max_tokens: 11, ignore_eos: true }, A);
    await stream({ prompt: prompt(6), max_tokens: 23, ignore_eos: true }, B);
    await stream({ prompt: prompt(7), max_tokens: 23, ignore_eos: true }, B);
    const m = (await request('GET', '/metrics')).body;
    const val = (t) => Number((m.match(new RegExp(`folio_tenant_generation_tokens_total\\{(?:[^}]*,)?tenant="${t}"\\} (\\S+)`)) || [])[1]);
    if (val('a') !== 11 || val('b') !== 46) fail(`per-tenant tokens a=${val('a')} b=${val('b')}`);
    // tenant b: max_running 1, max_waiting 2 -> of 6 concurrent long requests, some get 429
    const rs = await Promise.all(Array.from({ length: 6 }, (_, i) =>
      request('POST', '/v1/completions', { prompt: prompt(i), max_tokens: 30, ignore_eos: true }, { ...B, agent: new http.Agent() })));
    const n429 = rs.filter((r) => r.status === 429).length, n200 = rs.filter((r) => r.status === 200).length;
    if (n429 < 1 || n200 < 1 || n429 + n200 !== 6) fail(`tenant b: ${n200} ok, ${n429} 429`);
    const r429 = rs.find((r) => r.status === 429);
    if (!r429.headers['retry-after']) fail('429 without Retry-After');
    // tenant a is unaffected meanwhile
    const a2 = await request('POST', '/v1/completions', { prompt: [1, 2], max_tokens: 3 }, A);
    if (a2.status !== 200) fail(`tenant a -> ${a2.status}`);
    const m2 = (await request('GET', '/metrics')).body;
    if (!new RegExp(`folio_tenant_rejected_requests_total\\{(?:[^}]*,)?tenant="b"\\} ${n429}`).test(m2)) fail('429 not counted for b');
    if (!/folio_tenant_rejected_requests_total\{(?:[^}]*,)?tenant="a"\} 0/.test(m2)) fail('429 counted for a');
    ok(`tenants by API key: tokens a=11 b=46 separated; tenant b over max_waiting: ${n429} x 429 with Retry-After`);
  },

  // A request pipelined behind a running stream, when the server starts
  // draining in between: the stream finishes, the second request gets 503.
  async pipelined503() {
    const c = net.connect(sock);
    let got = '';
    c.on('data', (d) => { got += d.toString('latin1'); });
    const closed = new Promise((r) => c.on('close', r));
    const b1 = JSON.stringify({ prompt: prompt(2), max_tokens: 30, stream: true, ignore_eos: true });
    const b2 = JSON.stringify({ prompt: prompt(3), max_tokens: 3 });
    c.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${b1.length}\r\n\r\n${b1}` +
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${b2.length}\r\n\r\n${b2}`);
    await new Promise((r) => setTimeout(r, 100));
    console.log('STARTED');
    await closed;
    const codes = [...got.matchAll(/HTTP\/1\.1 (\d\d\d)/g)].map((m) => Number(m[1]));
    if (JSON.stringify(codes) !== '[200,503]') fail(`pipelined during drain: ${codes}`);
    if (!got.includes('data: [DONE]')) fail('stream cut by drain');
    ok('request pipelined behind a stream during drain: stream finished, then 503');
  },

  // Idle and half-sent connections are closed after --idle-timeout-ms
  // (args[0]); a streaming request outlives it.
  async idle() {
    const ms = Number(args[0]);
    const t0 = Date.now();
    const silent = rawExchange(Buffer.alloc(0), true);
    const partial = rawExchange(Buffer.from('GET /hea'), true);
    const [a, b] = await Promise.all([silent, partial]);
    const dt = Date.now() - t0;
    if (a !== '' || b !== '') fail(`idle connections got data: ${a} ${b}`);
    if (dt < ms * 0.8 || dt > ms + 4000) fail(`idle connections closed after ${dt} ms (timeout ${ms})`);
    const s = await stream({ prompt: prompt(1), max_tokens: Math.ceil(ms / 10), ignore_eos: true });
    if (!s.done) fail('stream cut by the idle timeout');
    ok(`idle and half-sent connections closed after ${dt} ms; a long stream is not`);
  },

  // Load for the SIGTERM test: starts N streams, reports when all started,
  // then checks each finished completely.
  async drainload() {
    const n = Number(args[0] || 16);
    const want = 60;
    let started = 0;
    const ps = Array.from({ length: n }, (_, i) => request('POST', '/v1/completions',
      { prompt: prompt(i), max_tokens: want, stream: true, ignore_eos: true },
      { agent: new http.Agent(), onData: () => { } }).then((r) => parseSSE(r.body)));
    // wait until all are running, then signal the caller via stdout
    for (;;) {
      const k = await kv();
      if (k.requests.running + k.requests.waiting >= n) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    console.log('STARTED');
    const rs = await Promise.all(ps);
    rs.forEach((r, i) => {
      if (!r.done || r.tokens[0].length !== want) fail(`stream ${i} cut by drain: ${r.tokens[0]?.length}`);
    });
    ok(`${n} running streams finished during drain`);
  },
};

function rawExchange(bytes, keepOpen = false) {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    let got = '';
    c.on('data', (d) => { got += d.toString('latin1'); });
    c.on('close', () => resolve(got));
    c.on('error', () => resolve(got));
    c.write(bytes, () => { if (!keepOpen) c.end(); });
    setTimeout(() => c.destroy(), keepOpen ? 20000 : 5000);
  });
}

async function metric(name) {
  const m = (await request('GET', '/metrics')).body;
  return Number((m.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm')) || [])[1]);
}

if (!scenarios[scenario]) fail('unknown scenario ' + scenario);
request('GET', '/v1/models').then((r) => { VOCAB = Math.min(JSON.parse(r.body).data[0].vocab_size, 4096); })
  .then(() => scenarios[scenario]()).then(() => process.exit(0), (e) => fail(e.stack || String(e)));
