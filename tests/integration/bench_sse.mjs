// tests/integration/bench_sse.mjs — server overhead: N concurrent completions of
// T tokens against foliod_fake with FOLIO_FAKE_STEP_US=0 (see BENCHMARKS.md).
// Usage: node bench_sse.mjs SOCKET N T stream|nostream
import http from 'node:http';
const sock = process.argv[2], n = Number(process.argv[3]), toks = Number(process.argv[4]), stream = process.argv[5] === 'stream';
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
function post(body) { return new Promise((res, rej) => { const r = http.request({ socketPath: sock, method: 'POST', path: '/v1/completions', agent }, (s) => { let d = 0; s.on('data', (x) => d += x.length); s.on('end', () => res(d)); }); r.on('error', rej); r.end(JSON.stringify(body)); }); }
const t0 = process.hrtime.bigint();
await Promise.all(Array.from({ length: n }, (_, i) => post({ prompt: [1, 2, 3, i % 500 + 3], max_tokens: toks, ignore_eos: true, stream })));
const s = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`${n} x ${toks} tokens ${stream ? 'streamed' : 'non-stream'}: ${s.toFixed(2)} s, ${(n * toks / s).toFixed(0)} tokens/s`);
