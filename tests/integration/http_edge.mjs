// tests/integration/http_edge.mjs — raw-socket clients for the HTTP layer's
// edges (node, no dependencies): half-close, slow and stopped readers,
// Expect: 100-continue, HTTP/1.0, malformed headers, slow bodies, drain,
// answers refused mid-request.
// Usage: node http_edge.mjs SCENARIO SOCKET [ARGS] (SOCKET: a Unix
// socket's path, or HOST:PORT)
// Exits 0 on success; prints "FAIL: ..." and exits 1 otherwise.
import net from 'node:net';

const [scenario, sock, ...args] = process.argv.slice(2);
const fail = (msg) => { console.error('FAIL: ' + msg); process.exit(1); };
const ok = (msg) => console.log('ok - ' + msg);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// SOCKET is a Unix socket's path, or HOST:PORT for TCP.
function target() {
  const tcp = /^([\d.]+):(\d+)$/.exec(sock);
  return tcp ? { host: tcp[1], port: Number(tcp[2]) } : { path: sock };
}

function connect() {
  return new Promise((resolve, reject) => {
    const c = net.createConnection({ ...target(), allowHalfOpen: true });
    c.once('connect', () => resolve(c));
    c.once('error', reject);
  });
}

// Collects everything the socket sends until it closes (or `ms` passes).
function readAll(c, ms = 20000) {
  return new Promise((resolve) => {
    const parts = [];
    const t = setTimeout(() => { c.destroy(); resolve({ data: Buffer.concat(parts), closed: false }); }, ms);
    c.on('data', (d) => parts.push(d));
    c.on('end', () => { clearTimeout(t); resolve({ data: Buffer.concat(parts), closed: true }); });
    c.on('error', () => { clearTimeout(t); resolve({ data: Buffer.concat(parts), closed: true }); });
  });
}

// Reads until `pred(buffer)` holds; resolves the buffer (or what came by `ms`).
function readUntil(c, pred, ms = 10000) {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const done = (v) => { clearTimeout(t); c.removeListener('data', on); c.removeListener('end', onEnd); resolve(v); };
    const on = (d) => { buf = Buffer.concat([buf, d]); if (pred(buf)) done(buf); };
    const onEnd = () => done(buf);
    const t = setTimeout(() => done(buf), ms);
    c.on('data', on);
    c.on('end', onEnd);
  });
}

function post(path, body, extra = '') {
  const b = typeof body === 'string' ? body : JSON.stringify(body);
  return `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
}

// Splits one HTTP/1.1 response: { status, headers (lower-case), body } with
// the chunked encoding undone.
function parseResponse(buf) {
  const s = buf.toString('latin1');
  const he = s.indexOf('\r\n\r\n');
  if (he < 0) return null;
  const lines = s.slice(0, he).split('\r\n');
  const status = Number(lines[0].split(' ')[1]);
  const headers = {};
  for (const l of lines.slice(1)) { const i = l.indexOf(':'); headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim(); }
  let rest = buf.subarray(Buffer.byteLength(s.slice(0, he + 4), 'latin1'));
  let body;
  if (headers['transfer-encoding'] === 'chunked') {
    const out = [];
    let complete = false;
    for (;;) {
      const le = rest.indexOf('\r\n');
      if (le < 0) break;
      const n = parseInt(rest.subarray(0, le).toString(), 16);
      if (n === 0) { complete = true; break; }
      if (rest.length < le + 2 + n + 2) break;
      out.push(rest.subarray(le + 2, le + 2 + n));
      rest = rest.subarray(le + 2 + n + 2);
    }
    body = Buffer.concat(out);
    return { status, headers, body, complete };
  }
  const cl = headers['content-length'];
  body = cl !== undefined ? rest.subarray(0, Number(cl)) : rest;
  return { status, headers, body, complete: cl === undefined || rest.length >= Number(cl) };
}

// Sends head then body at once; reads the answer until the server's end
// of it, then finishes sending and closes.  Resolves { data, err (a reset:
// ECONNRESET / EPIPE, or another error's code), eofMs (from the first
// byte of the answer to the server's end; null if none came) }.
function lingerExchange(head, body) {
  return new Promise((resolve) => {
    const c = net.createConnection({ ...target(), allowHalfOpen: true });
    const parts = [];
    let t1 = 0, eofMs = null, err = null, wrote = false, ended = false;
    const t = setTimeout(() => c.destroy(), 10000);
    const finish = () => { if (wrote && ended) c.end(); };
    c.on('data', (d) => { if (!parts.length) t1 = Date.now(); parts.push(d); });
    c.on('end', () => { eofMs = t1 ? Date.now() - t1 : null; ended = true; finish(); });
    c.on('error', (e) => { err = err || e.code || String(e); });
    c.on('close', () => { clearTimeout(t); resolve({ data: Buffer.concat(parts), err, eofMs }); });
    c.write(head);
    c.write(body, () => { wrote = true; finish(); });
  });
}

const scenarios = {
  // A client that sends its request and shuts its write side (socat,
  // curl -T) still gets the answer: a small route and a completion.
  async halfclose() {
    for (const [what, req] of [
      ['/health', 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n'],
      ['completion', post('/v1/completions', { prompt: [1, 2, 3], max_tokens: 20, temperature: 0 })],
      ['stream', post('/v1/completions', { prompt: [1, 2, 3], max_tokens: 20, stream: true })],
    ]) {
      const c = await connect();
      c.end(req); // write, then shutdown(SHUT_WR)
      const r = await readAll(c);
      const p = parseResponse(r.data);
      if (!p || p.status !== 200 || !p.complete) fail(`half-closed ${what}: ${r.data.toString().slice(0, 300)}`);
      if (!r.closed) fail(`half-closed ${what}: the server did not close after answering`);
      if (what === 'completion' && JSON.parse(p.body).usage.completion_tokens !== 20) fail('half-closed completion: ' + p.body);
      if (what === 'stream' && !p.body.toString().includes('data: [DONE]')) fail('half-closed stream without [DONE]');
    }
    // three pipelined requests, then the half-close: three answers
    const c = await connect();
    c.end('GET /health HTTP/1.1\r\nHost: x\r\n\r\n' +
      post('/v1/completions', { prompt: [4, 5], max_tokens: 5, temperature: 0 }) +
      'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
    const r = await readAll(c);
    const n = (r.data.toString().match(/^HTTP\/1\.1 200 OK\r\n/gm) || []).length;
    if (n !== 3 || !r.closed) fail(`pipelined then half-closed: ${n} answers of 3, closed ${r.closed}`);
    ok('half-closed clients get /health, a completion, a stream and 3 pipelined answers, then the connection closes');
  },

  // Stream from an HTTP/1.0 client: no chunked encoding, the body ends
  // with the connection.
  async http10() {
    const b = JSON.stringify({ prompt: [1, 2, 3], max_tokens: 10, stream: true });
    const c = await connect();
    c.write(`POST /v1/completions HTTP/1.0\r\nContent-Length: ${b.length}\r\n\r\n${b}`);
    const r = await readAll(c);
    const s = r.data.toString();
    const p = parseResponse(r.data);
    if (!p || p.status !== 200) fail('HTTP/1.0 stream: ' + s.slice(0, 300));
    if (p.headers['transfer-encoding']) fail('HTTP/1.0 client got Transfer-Encoding: ' + p.headers['transfer-encoding']);
    if (!r.closed) fail('HTTP/1.0 stream not closed at its end');
    const body = p.body.toString();
    if (!body.startsWith('data: {') || !body.endsWith('data: [DONE]\n\n')) fail('HTTP/1.0 body is not plain SSE: ' + JSON.stringify(body.slice(0, 80)) + ' ... ' + JSON.stringify(body.slice(-40)));
    ok('HTTP/1.0 stream: close-delimited SSE, no chunked encoding');
  },

  // Expect: 100-continue is answered before the body is sent.
  async expect() {
    const b = JSON.stringify({ prompt: 'hello' });
    const c = await connect();
    c.write(`POST /detokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: ${JSON.stringify({ tokens: [300, 301] }).length}\r\n\r\n`);
    const t0 = Date.now();
    const got = await readUntil(c, (buf) => buf.includes('\r\n\r\n'), 900);
    if (!got.toString().startsWith('HTTP/1.1 100 Continue\r\n\r\n')) fail(`no 100 Continue within 900 ms: ${JSON.stringify(got.toString())}`);
    const wait = Date.now() - t0;
    c.end(JSON.stringify({ tokens: [300, 301] }));
    const r = await readAll(c);
    const p = parseResponse(r.data);
    if (!p || p.status !== 200 || JSON.parse(p.body).prompt !== ' w044 w045') fail('after 100 Continue: ' + r.data.toString().slice(0, 300));
    // an expectation we cannot meet: 417
    const c2 = await connect();
    c2.end('POST /detokenize HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nContent-Length: 2\r\n\r\n{}');
    const p2 = parseResponse((await readAll(c2)).data);
    if (!p2 || p2.status !== 417) fail('unknown Expect: ' + (p2 && p2.status));
    void b;
    ok(`Expect: 100-continue answered in ${wait} ms; other expectations 417`);
  },

  // Header names are tokens: a space (or another separator) inside one is a 400.
  async headername() {
    for (const h of ['Bad Header: x', 'Bad\tHeader: x', 'Bad(Header): x', 'Bad"Header: x']) {
      const c = await connect();
      c.end(`GET /health HTTP/1.1\r\nHost: x\r\n${h}\r\n\r\n`);
      const p = parseResponse((await readAll(c)).data);
      if (!p || p.status !== 400) fail(`header ${JSON.stringify(h)}: status ${p && p.status}`);
    }
    const c = await connect();
    c.end('GET /health HTTP/1.1\r\nHost: x\r\nX-Fine_Header.1~: y\r\n\r\n');
    const p = parseResponse((await readAll(c)).data);
    if (!p || p.status !== 200) fail('a valid token header name refused: ' + (p && p.status));
    ok('header names with a space, tab or separator: 400; token names accepted');
  },

  // Requests refused while the parser reads them (400 malformed request
  // line, 414, 431, 417), each followed at once by 2 MB the server will
  // never parse: the client must read the whole answer, with no reset, and
  // see the end of it well before the linger deadline (the server shuts
  // its write side once the answer is out).  A server that closed with the
  // rest unread reset the connection, and on TCP the client lost the
  // answer.  ARGS[0]: tries per case (default 5).
  async linger() {
    const tries = Number(args[0] || 5);
    const junk = Buffer.alloc(2 << 20, 'x');
    const cases = [
      [400, 'GET /health HTTX/1.1\r\n'],
      [414, 'GET /' + 'a'.repeat(9000) + ' HTTP/1.1\r\n'],
      [431, 'GET /health HTTP/1.1\r\nHost: x\r\nX-A: ' + 'a'.repeat(70000) + '\r\n'],
      [417, `POST /detokenize HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nContent-Length: ${junk.length}\r\n\r\n`],
    ];
    const bad = [];
    let eofMax = 0;
    for (const [want, head] of cases) {
      const st = { answered: 0, reset: 0, other: 0 };
      for (let i = 0; i < tries; i++) {
        const r = await lingerExchange(head, junk);
        const p = r.data.length ? parseResponse(r.data) : null;
        let msg = null;
        try { msg = p && p.complete && JSON.parse(p.body).error.message; } catch { msg = null; }
        if (r.err) { st.reset++; st[r.err] = (st[r.err] || 0) + 1; }
        if (p && p.status === want && msg) st.answered++;
        else if (!r.err) st.other++;
        if (r.eofMs !== null) eofMax = Math.max(eofMax, r.eofMs);
        if (r.eofMs === null && !r.err) bad.push(`${want}: no end of the answer`);
      }
      if (st.answered !== tries || st.reset) bad.push(`${want}: ${JSON.stringify(st)} of ${tries}`);
    }
    if (bad.length) fail('answers refused mid-request: ' + bad.join('; '));
    if (eofMax > 700) fail(`the end of an answer came ${eofMax} ms after it (no half-close: the linger deadline)`);
    ok(`400, 414, 431, 417 each followed by 2 MB: ${tries} x 4 answers read whole, no reset, their end at most ${eofMax} ms after them`);
  },

  // A client that sends its whole body before it reads (as many do) and
  // takes longer than the linger's gap allowance in all: a 6 MB body over
  // --max-body (413 as soon as the headers are in), 64 KB every 20 ms
  // (about 2 s), nothing read until the last byte is written.  The server
  // must keep dropping the body while it arrives, so the client then reads
  // the whole 413; a linger with a fixed one-second end reset it.
  async slowupload() {
    const total = 6 << 20, piece = 64 << 10;
    const c = net.createConnection({ ...target(), allowHalfOpen: true });
    await new Promise((res, rej) => { c.once('connect', res); c.once('error', rej); });
    let err = null;
    c.on('error', (e) => { err = err || e.code || String(e); });
    c.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
            `Content-Length: ${total}\r\n\r\n`);
    const t0 = Date.now();
    for (let sent = 0; sent < total && !err; sent += piece) {
      c.write(Buffer.alloc(Math.min(piece, total - sent), 'x'));
      await sleep(20);
    }
    const ms = Date.now() - t0;
    const parts = [];
    const ended = new Promise((res) => { c.on('end', res); c.on('close', res); });
    c.on('data', (d) => parts.push(d));
    await Promise.race([ended, sleep(5000)]);
    c.end();
    if (err) fail(`slow upload: ${err} after ${ms} ms`);
    const p = parseResponse(Buffer.concat(parts));
    let msg = null;
    try { msg = p && p.complete && JSON.parse(p.body).error.message; } catch { msg = null; }
    if (!p || p.status !== 413 || !msg) fail(`slow upload: no whole 413 (${Buffer.concat(parts).length} bytes read)`);
    ok(`a 6 MB body over --max-body sent in ${ms} ms before reading: its 413 read whole, no reset`);
  },

  // A body trickling in slower than the minimum rate is refused with a 408
  // long before the idle timeout.
  async slowbody() {
    const c = await connect();
    c.write('POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"prompt":"');
    const t0 = Date.now();
    let closed = false;
    const res = readAll(c, 15000).then((r) => { closed = true; return r; });
    while (!closed && Date.now() - t0 < 12000) {
      c.write('aaaaaaaaaa');
      await sleep(200);
    }
    const r = await res;
    const p = parseResponse(r.data);
    const ms = Date.now() - t0;
    if (!p || p.status !== 408) fail(`slow body: ${r.data.toString().slice(0, 200)} after ${ms} ms`);
    if (ms > 8000) fail(`slow body refused only after ${ms} ms`);
    ok(`a body at 50 B/s is refused with 408 after ${ms} ms`);
  },

  // GET PATH read slowly (a pause every 64 KiB): the response arrives
  // whole even though reading it takes longer than the idle timeout.  Each
  // read costs the client only its own bytes (the length comes from the
  // headers, parsed once): re-parsing everything received at every read
  // grew the gaps between reads with the response (about 10 ms each at 5
  // MB) until, on a loaded machine, one exceeded the idle timeout and the
  // daemon rightly dropped the client as a slow reader.
  async slowget() {
    const [path, pauseMs] = [args[0], Number(args[1] || 50)];
    const c = await connect();
    c.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
    const parts = [];
    let got = 0;
    let need = -1; /* header bytes + Content-Length, once the headers are in */
    const t0 = Date.now();
    const done = new Promise((resolve) => {
      c.on('data', (d) => {
        parts.push(d);
        got += d.length;
        if (need < 0) {
          const h = Buffer.concat(parts);
          const he = h.indexOf('\r\n\r\n');
          if (he >= 0) {
            const m = /\r\ncontent-length:\s*(\d+)/i.exec(h.subarray(0, he).toString('latin1'));
            need = m ? he + 4 + Number(m[1]) : Infinity; /* no length: read to the end */
          }
        }
        if (need >= 0 && got >= need) { resolve(parseResponse(Buffer.concat(parts))); return; }
        c.pause();
        setTimeout(() => c.resume(), pauseMs);
      });
      c.on('end', () => resolve(parseResponse(Buffer.concat(parts))));
      c.on('error', () => resolve(parseResponse(Buffer.concat(parts))));
    });
    c.setNoDelay?.(true);
    const p = await done;
    const ms = Date.now() - t0;
    if (!p || p.status !== 200) fail(`slow GET ${path}: ${Buffer.concat(parts).toString().slice(0, 200)}`);
    if (p.body.length !== Number(p.headers['content-length'])) fail(`slow GET ${path}: ${p.body.length} of ${p.headers['content-length']} bytes after ${ms} ms`);
    JSON.parse(p.body);
    c.destroy();
    ok(`slow reader got ${path} whole: ${p.body.length} bytes in ${ms} ms`);
  },

  // GET PATH and never read: the write clock drops the connection (the
  // daemon logs it; ARGS[1] is its log).
  async stallget() {
    const c = await connect();
    c.write(`GET ${args[0]} HTTP/1.1\r\nHost: x\r\n\r\n`);
    c.pause();
    const fs = await import('node:fs');
    const t0 = Date.now();
    while (!fs.readFileSync(args[1], 'utf8').includes('no write progress')) {
      if (Date.now() - t0 > 10000) fail('a reader that never reads was not dropped in 10 s');
      await sleep(50);
    }
    c.destroy();
    ok(`a reader that never reads ${args[0]} is dropped after ${Date.now() - t0} ms`);
  },

  // A streaming client that stops reading: dropped at the cap; when it
  // reads again it finds the end of the stream and a final error event.
  async stopreader() {
    const c = await connect();
    c.write(post('/v1/completions', { prompt: [1, 2], max_tokens: 2000, ignore_eos: true, stream: true, logprobs: 5, n: 4 }));
    c.pause();
    const marker = args[0];
    const fs = await import('node:fs');
    const t0 = Date.now();
    while (!fs.readFileSync(marker, 'utf8').includes('slow reader')) {
      if (Date.now() - t0 > 20000) fail('no "slow reader" in the daemon log after 20 s');
      await sleep(100);
    }
    c.resume();
    const r = await readAll(c, 10000);
    const p = parseResponse(r.data);
    if (!p || p.status !== 200) fail('stopped reader: ' + r.data.toString().slice(0, 200));
    const body = p.body.toString();
    const events = body.split('\n\n').filter((e) => e.startsWith('data: '));
    const last = events[events.length - 1] || '';
    if (!last.startsWith('data: {"error"')) fail('stream of a stopped reader does not end with an error event: ' + last.slice(0, 200));
    const err = JSON.parse(last.slice(6)).error;
    if (err.code !== 'slow_reader') fail('error event: ' + last);
    if (!p.complete) fail('stream not terminated (no last chunk)');
    if (!r.closed) fail('connection left open');
    ok(`a stopped reader is dropped at the cap; on reading again it finds ${events.length - 1} events then the error event`);
  },

  // A kept-alive connection made before SIGTERM can still ask /health and
  // is told 503 (Connection: close).  Prints READY once the connection is
  // up; the caller sends SIGTERM and touches ARGS[0].
  async drainhealth() {
    const c = await connect();
    c.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    let p = parseResponse(await readUntil(c, (b) => { const q = parseResponse(b); return q && q.complete; }));
    if (!p || p.status !== 200) fail('health before drain: ' + (p && p.status));
    console.log('READY');
    const fs = await import('node:fs');
    const t0 = Date.now();
    while (!fs.existsSync(args[0])) {
      if (Date.now() - t0 > 10000) fail('no signal');
      await sleep(20);
    }
    await sleep(200);
    c.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    const r = await readAll(c, 5000);
    p = parseResponse(r.data);
    if (!p || p.status !== 503) fail('health on a kept-alive connection while draining: ' + r.data.toString().slice(0, 200));
    if ((p.headers.connection || '').toLowerCase() !== 'close') fail('503 without Connection: close');
    if (!r.closed) fail('connection not closed after the 503');
    ok('a kept-alive connection sees /health 503 while draining, then closes');
  },

  // A stream cut short (engine error, drain timeout) ends with an error
  // event the client can read, and a terminated body.  ARGS: the expected
  // error code or type.
  async streamerror() {
    const want = args[0];
    const c = await connect();
    c.write(post('/v1/completions', { prompt: [1, 2], max_tokens: Number(args[1] || 2000), ignore_eos: true, stream: true }));
    console.log('STARTED');
    const r = await readAll(c, 15000);
    const p = parseResponse(r.data);
    if (!p || p.status !== 200) fail('stream: ' + r.data.toString().slice(0, 300));
    const events = p.body.toString().split('\n\n').filter((e) => e.startsWith('data: '));
    const last = events[events.length - 1] || '';
    if (!last.startsWith('data: {"error"')) fail('the stream does not end with an error event: ' + JSON.stringify(last.slice(0, 200)));
    const e = JSON.parse(last.slice(6)).error;
    if (e.code !== want && e.type !== want) fail(`error event ${last}, want ${want}`);
    if (events.some((x) => x === 'data: [DONE]')) fail('[DONE] in a failed stream');
    if (!p.complete) fail('failed stream has no last chunk');
    ok(`a stream cut short ends with an error event (${want}) after ${events.length - 1} events`);
  },
};

if (!scenarios[scenario]) fail('unknown scenario ' + scenario);
scenarios[scenario]().then(() => process.exit(0), (e) => fail(e.stack || String(e)));
