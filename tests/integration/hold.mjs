// tests/integration/hold.mjs — a client that takes as much of the daemon as
// it can: opens N connections to a Unix socket and holds them.
//
//   node hold.mjs SOCK N [BODY_BYTES]
//
// Each connection sends nothing (BODY_BYTES absent) or the headers of a
// POST whose body is announced 1 KiB longer than the BODY_BYTES it sends
// (a partial body held in the daemon's buffers).  Connections are opened in
// batches (a full listen backlog would refuse them; a connect that still
// meets a full backlog, EAGAIN on a Unix socket while the daemon is slow to
// accept, is tried again for up to 5 s, as a real client would).  Once nothing has
// arrived for 1.5 s it prints one JSON line: connected, answered (with a
// 503 whose body is JSON), bad503 (a 503 without a JSON error body), reset
// (ECONNRESET / EPIPE), other (anything else answered), open (no answer,
// still open); then it holds every connection until stdin closes.
import net from 'node:net';

const [sock, nArg, bodyArg] = process.argv.slice(2);
const N = Number(nArg);
const bodyBytes = bodyArg ? Number(bodyArg) : 0;
const st = { connected: 0, answered: 0, bad503: 0, reset: 0, other: 0, open: 0, failed: 0 };
const conns = [];
let lastEvent = Date.now();

function open(tries = 250) {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    const me = { c, got: '', done: false };
    c.on('connect', () => {
      conns.push(me);
      me.connected = true;
      st.connected++;
      if (bodyBytes) {
        c.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                `Content-Length: ${bodyBytes + 1024}\r\n\r\n`);
        c.write(Buffer.alloc(bodyBytes, 0x20));
      }
      resolve();
    });
    c.on('data', (d) => { me.got += d.toString('latin1'); lastEvent = Date.now(); });
    c.on('close', () => { lastEvent = Date.now(); });
    c.on('error', (e) => {
      const reset = e.code === 'ECONNRESET' || e.code === 'EPIPE';
      me.err = e.code;
      if (me.connected) {
        if (reset) me.reset = true;
        return;
      }
      if (e.code === 'EAGAIN' && tries > 1) {
        setTimeout(() => open(tries - 1).then(resolve), 20);
        return;
      }
      conns.push(me);
      if (reset) me.reset = true;
      else st.failed++;
      resolve();
    });
  });
}

for (let i = 0; i < N; i += 200) {
  await Promise.all(Array.from({ length: Math.min(200, N - i) }, open));
}
// settled: nothing arrived for 1.5 s (a loaded machine accepts slowly)
const t0 = Date.now();
while (Date.now() - t0 < 30000 && (Date.now() - t0 < 2500 || Date.now() - lastEvent < 1500))
  await new Promise((r) => setTimeout(r, 250));
for (const m of conns) {
  if (m.got.startsWith('HTTP/1.1 503')) {
    const body = m.got.slice(m.got.indexOf('\r\n\r\n') + 4);
    let okJson = false;
    try { okJson = !!JSON.parse(body).error.message; } catch { okJson = false; }
    if (okJson) st.answered++; else st.bad503++;
  } else if (m.reset) st.reset++;
  else if (m.got) st.other++;
  else if (!m.c.destroyed && m.c.readyState === 'open') st.open++;
}
console.log(JSON.stringify(st));
process.stdin.resume();
process.stdin.on('end', () => { for (const m of conns) m.c.destroy(); process.exit(0); });
