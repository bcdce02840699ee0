// tests/integration/dashboard/browser_test.mjs — drives the /dashboard page
// in a real headless Chromium (puppeteer-core, the system browser) and
// checks what it drew against what the server reports.
//
//   node browser_test.mjs fake URL          (frozen fake_server.mjs)
//   node browser_test.mjs live URL SHOT.png [MIN_TENANTS]   (foliod under load)
//
// Both modes: wait for live data; read the block map back from the canvas
// pixels (one sample per cell centre, classified free / cached / used by
// colour) and compare with the counts the page says it drew and with the
// server's /v1/kv; charts have points; the tenant table has rows; the
// latency table has numbers.  fake: the map is frozen, so every cell's
// majority state is recomputed here from /v1/kv and must match exactly
// (100,000 blocks: aggregation).  live: /v1/kv is fetched right after a
// page update and block counts must agree within a timing tolerance.
// Both: at 1024, 1400 and 1920 px wide, every chart's legend item lies
// inside its canvas and every HTML legend inside its panel (nothing cut);
// a screenshot per width (SHOT with -1024 / -1400 / -1920 before .png).
// /v1/kv's compact block map is decoded here on its own ('.' free, ':'
// cached, anything else used), not with the page's decoder.
// Exits 0 on success, 1 with a message on failure.
import puppeteer from "puppeteer-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [mode, url, shot, minTenantsArg] = process.argv.slice(2);
const fail = (msg) => { console.error("FAIL: " + msg); process.exitCode = 1; throw new Error(msg); };
const ok = (msg) => console.log("ok - " + msg);

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "folio-chromium-"));
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", `--user-data-dir=${profile}`],
});
let code = 0;
try {
  const page = await browser.newPage();
  // fake: a narrow window, so 100,000 blocks need aggregation (> 1 block per cell)
  await page.setViewport({width: mode === "fake" ? 800 : 1400, height: 1000, deviceScaleFactor: 1});
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  // no request may leave the origin
  const origin = new URL(url).origin;
  const foreign = [];
  page.on("request", (r) => { if (!r.url().startsWith(origin)) foreign.push(r.url()); });

  // DASH_KEY: foliod's key on TCP, given as the password of the browser's
  // login prompt (Basic)
  if (process.env.DASH_KEY) await page.authenticate({username: "op", password: process.env.DASH_KEY});
  await page.goto(url + "/dashboard", {waitUntil: "load", timeout: 30000});
  // DASH_WARMUP: polls to wait for before checking (more history in the
  // screenshot); default 6
  const warm = +(process.env.DASH_WARMUP || 6);
  await page.waitForFunction((w) => +document.body.dataset.updates >= w, {timeout: 60000 + 2000 * warm}, warm);
  ok(`page loaded and polled /v1/kv and /metrics ${warm} times`);

  // Reads the canvas back: the centre pixel of every cell, classified.
  const readMap = (waitNext) => page.evaluate(async (waitNext) => {
    if (waitNext) {
      const u0 = +document.body.dataset.updates;
      await new Promise((res) => {
        const iv = setInterval(() => { if (+document.body.dataset.updates > u0) { clearInterval(iv); res(); } }, 5);
      });
    }
    const cv = document.getElementById("blockmap");
    const d = {...cv.dataset};
    // fetch the server's view at (nearly) the same moment
    const kv = await (await fetch("/v1/kv", {cache: "no-store"})).json();
    const img = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
    const cell = +d.cell, cols = +d.cols, cells = +d.cells;
    const px = {used: 0, cached: 0, free: 0, other: 0};
    const perCell = [];
    for (let c = 0; c < cells; c++) {
      const x = (c % cols) * cell + Math.floor(cell / 2), y = Math.floor(c / cols) * cell + Math.floor(cell / 2);
      const o = (y * cv.width + x) * 4;
      const r = img[o], g = img[o + 1], b = img[o + 2];
      const mx = Math.max(r, g, b), mn = Math.min(r, g, b);
      let k;
      if (Math.abs(r - 0x26) < 3 && Math.abs(g - 0x2c) < 3 && Math.abs(b - 0x37) < 3) k = "free";
      else if (Math.abs(r - 0x7f) < 3 && Math.abs(g - 0x8a) < 3 && Math.abs(b - 0xa0) < 3) k = "cached";
      else if (mx - mn > 40) k = "used";
      else k = "other";
      px[k]++;
      perCell.push(k);
    }
    return {d, kv, px, perCell};
  }, waitNext);

  if (mode === "fake") {
    const {d, kv, px, perCell} = await readMap(false);
    const states = kv.block_map.states;
    const n = states.length, run = +d.run;
    const stateOf = (b) => states[b] === "." ? "free" : states[b] === ":" ? "cached" : "used";
    if (+d.blocks !== n) fail(`page drew ${d.blocks} blocks, /v1/kv has ${n}`);
    if (+d.used !== kv.blocks.used || +d.cached !== kv.blocks.cached || +d.free !== kv.blocks.free)
      fail(`page counts ${d.used}/${d.cached}/${d.free} != /v1/kv ${kv.blocks.used}/${kv.blocks.cached}/${kv.blocks.free}`);
    if (n >= 50000 && !(run > 1)) fail(`${n} blocks drawn without aggregation (run ${run})`);
    // recompute every cell's majority state
    let mism = 0;
    const exp = {used: 0, cached: 0, free: 0};
    for (let c = 0; c * run < n; c++) {
      const k = {used: 0, cached: 0, free: 0};
      for (let b = c * run; b < Math.min(n, (c + 1) * run); b++) k[stateOf(b)]++;
      const s = k.used >= k.cached && k.used >= k.free && k.used > 0 ? "used" : k.cached >= k.free && k.cached > 0 ? "cached" : "free";
      exp[s]++;
      if (perCell[c] !== s) mism++;
    }
    if (mism) fail(`${mism} cells drawn in the wrong state (pixels ${JSON.stringify(px)}, expected ${JSON.stringify(exp)})`);
    if (+d.cellsUsed !== exp.used || +d.cellsCached !== exp.cached || +d.cellsFree !== exp.free)
      fail(`page cell counts ${d.cellsUsed}/${d.cellsCached}/${d.cellsFree} != expected ${JSON.stringify(exp)}`);
    ok(`block map: ${n} blocks in ${d.cells} cells of ${run} (${d.cell}px, ${d.cols} cols); every cell's pixel matches its run's majority state`);
    // percentiles from the fake's fixed buckets, worked out by hand:
    // TTFT cumulative 0,2,12,32,38,40 at le .01,.025,.05,.1,.25,.5: p50 =
    // .05 + .05 * (20 - 12) / 20 = 70 ms; p90 = .1 + .15 * 4 / 6 = 200 ms;
    // p99 = .25 + .25 * 1.6 / 2 = 450 ms.  ITL cumulative 10,70,95,99,100
    // at .005,.01,.02,.04,.08: p50 = .005 + .005 * 40 / 60 = 8.33 ms;
    // p90 = .01 + .01 * 20 / 25 = 18 ms; p99 = .02 + .02 * 4 / 4 = 40 ms.
    const lat = await page.evaluate(() => ["ttft50", "ttft90", "ttft99", "itl50", "itl90", "itl99"]
      .map((id) => document.getElementById(id).textContent).join(" "));
    if (lat !== "70.0 ms 200.0 ms 450.0 ms 8.33 ms 18.0 ms 40.0 ms") fail(`percentiles: ${lat}`);
    ok("TTFT / ITL percentiles from the histogram buckets: " + lat);
  } else {
    // live: counts drawn vs /v1/kv fetched right after an update
    const tol = (n) => Math.max(3, Math.ceil(0.15 * n));
    let good = 0, tries = 0, last = "";
    while (tries < 8 && good < 3) {
      tries++;
      const {d, kv, px} = await readMap(true);
      const n = kv.num_blocks;
      const pageUsed = +d.used, srvUsed = kv.blocks.used;
      // the pixels must show exactly what the page counted
      if (+d.run === 1 && (px.used !== +d.used || px.cached !== +d.cached || px.free !== +d.free || px.other))
        fail(`pixels ${JSON.stringify(px)} differ from the page's counts ${d.used}/${d.cached}/${d.free}`);
      last = `page used/cached/free ${d.used}/${d.cached}/${d.free}, /v1/kv ${srvUsed}/${kv.blocks.cached}/${kv.blocks.free} of ${n}`;
      if (+d.blocks === n && Math.abs(pageUsed - srvUsed) <= tol(n) &&
          Math.abs(+d.cached - kv.blocks.cached) <= tol(n) && Math.abs(+d.free - kv.blocks.free) <= tol(n) &&
          (pageUsed > 0 || srvUsed === 0))
        good++;
      console.log("  sample: " + last);
    }
    if (good < 3) fail(`block map disagrees with /v1/kv: ${last}`);
    ok(`block map agrees with /v1/kv in ${good}/${tries} samples; pixels match the drawn counts`);
    const anyUsed = await page.evaluate(() => +document.getElementById("blockmap").dataset.used);
    if (!(anyUsed > 0)) fail("no used block drawn under load");
  }

  // charts, tenants, latency, geometry
  const info = await page.evaluate(() => ({
    points: ["c-kv", "c-req", "c-tps", "c-lat"].map((id) => +document.getElementById(id).dataset.points),
    tenants: [...document.querySelectorAll("#tenants tbody tr[data-tenant]")].map((r) => r.innerText),
    ttft: document.getElementById("ttft50").textContent,
    itl: document.getElementById("itl50").textContent,
    gen: document.getElementById("k-gen").textContent,
    geo: document.getElementById("geo").textContent,
    geometry: document.getElementById("geometry").innerText.replace(/\s+/g, " "),
    // a chart canvas is not blank: count non-background pixels
    // the stacked KV areas fill the plot's height near "now"
    ink: (() => {
      const cv = document.getElementById("c-kv");
      const x0 = Math.floor(cv.width * 0.93), x1 = Math.floor(cv.width * 0.97);
      const y0 = Math.floor(cv.height * 0.2), y1 = Math.floor(cv.height * 0.85);
      const img = cv.getContext("2d").getImageData(x0, y0, x1 - x0, y1 - y0).data;
      let k = 0;
      for (let i = 3; i < img.length; i += 4) if (img[i] > 0) k++;
      return k / ((x1 - x0) * (y1 - y0));
    })(),
  }));
  if (info.points.some((p) => p < 3)) fail(`charts have too few points: ${info.points}`);
  if (info.ink < 0.9) fail(`KV usage chart is nearly empty (${info.ink})`);
  const minTenants = +(minTenantsArg || 1);
  if (info.tenants.length < minTenants) fail(`tenant table has ${info.tenants.length} rows`);
  if (!/\d/.test(info.ttft) || !/\d/.test(info.itl)) fail(`latency percentiles missing: ${info.ttft} ${info.itl}`);
  if (!/\d/.test(info.gen)) fail(`no generated tokens/s: ${info.gen}`);
  if (!/blocks/.test(info.geo) || !/bytes per token/.test(info.geometry)) fail(`geometry missing: ${info.geo}`);
  ok(`charts ${info.points} points; ${info.tenants.length} tenant rows; TTFT p50 ${info.ttft}, ITL p50 ${info.itl}; ${info.gen} gen tok/s`);

  // hover names a block
  const box = await (await page.$("#blockmap")).boundingBox();
  await page.mouse.move(box.x + 3, box.y + 3);
  const tip = await page.$eval("#tip", (e) => e.style.display === "block" ? e.textContent : "");
  if (!/^blocks? \d/.test(tip)) fail(`hover shows no block: '${tip}'`);
  ok("hover names the block under the cursor: " + tip.split("\n")[0]);

  if (shot) {
    await page.mouse.move(0, 0);
    await page.screenshot({path: shot, fullPage: true});
    ok("screenshot " + shot);
  }

  // legends at three widths: chart legends inside their canvas, HTML
  // legends inside their panel; a screenshot per width
  for (const width of [1024, 1400, 1920]) {
    await page.setViewport({width, height: 1000, deviceScaleFactor: 1});
    const u0 = await page.evaluate(() => +document.body.dataset.updates);
    await page.waitForFunction((u) => +document.body.dataset.updates >= u + 2, {timeout: 20000}, u0);
    const bad = await page.evaluate(() => {
      const out = [];
      let items = 0;
      for (const cv of document.querySelectorAll("canvas[data-legend]")) {
        const cw = cv.getBoundingClientRect().width;
        for (const l of JSON.parse(cv.dataset.legend)) {
          items++;
          if (l.x < 0 || l.x + l.w > cw + 0.5) out.push(`${cv.id}: '${l.text}' spans ${l.x.toFixed(0)}..${(l.x + l.w).toFixed(0)} of ${cw.toFixed(0)}`);
        }
      }
      for (const lg of document.querySelectorAll(".legend")) {
        const panel = lg.closest("section").getBoundingClientRect();
        for (const sp of lg.children) {
          if (!sp.textContent) continue;
          items++;
          const r = sp.getBoundingClientRect();
          if (r.left < panel.left || r.right > panel.right + 0.5 || sp.scrollWidth > sp.clientWidth + 1)
            out.push(`legend '${sp.textContent}' ${r.left.toFixed(0)}..${r.right.toFixed(0)} outside ${panel.left.toFixed(0)}..${panel.right.toFixed(0)}`);
        }
      }
      return {out, items, rows: [...document.querySelectorAll("canvas[data-legend]")].map((c) => c.dataset.legendRows)};
    });
    if (bad.items < 10) fail(`${width} px: only ${bad.items} legend items found`);
    if (bad.out.length) fail(`${width} px: legend cut: ${bad.out.slice(0, 4).join("; ")}`);
    if (shot) {
      const f = shot.replace(/\.png$/, `-${width}.png`);
      await page.mouse.move(0, 0);
      await page.screenshot({path: f, fullPage: true});
    }
    ok(`${width} px: ${bad.items} legend items all inside (chart legend rows ${bad.rows.join(",")})`);
  }
  if (foreign.length) fail("requests left the origin: " + foreign.slice(0, 3).join(", "));
  if (errors.length) fail("page errors: " + errors.slice(0, 3).join(" | "));
  ok("no page error, no foreign request");
} catch (e) {
  code = 1;
  if (!process.exitCode) console.error("FAIL: " + (e.stack || e));
} finally {
  await browser.close();
  fs.rmSync(profile, {recursive: true, force: true});
}
process.exit(code || process.exitCode || 0);
