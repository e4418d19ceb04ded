// Pyroscope's Node SDK (@pyroscope/nodejs) pushing real profiles of this
// process to a Kiln server, through a recording proxy in this same process:
//   node pyroscope_push.js KILN_URL OUT_DIR SECONDS TOKEN
// Each request the SDK makes is forwarded to KILN_URL unchanged; its URL,
// Authorization header, body and Kiln's answer are written to OUT_DIR as
// req-N.json + req-N.pprof, so the test can compare what the SDK sent with
// what Kiln answers to queries. Exits non-zero if the SDK sent nothing.
'use strict';
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const Pyroscope = require('@pyroscope/nodejs');

const [kilnUrl, outDir, secondsArg, token] = process.argv.slice(2);
const seconds = Number(secondsArg || 3);
let n = 0;
const pending = [];

const proxy = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const id = n++;
    const done = fetch(kilnUrl + req.url, {
      method: req.method,
      headers: {
        'content-type': req.headers['content-type'] || 'application/octet-stream',
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      },
      body,
    }).then(async (r) => {
      const answer = await r.text();
      fs.writeFileSync(path.join(outDir, `req-${id}.pprof`), body);
      fs.writeFileSync(path.join(outDir, `req-${id}.json`), JSON.stringify({
        url: req.url, authorization: req.headers.authorization || '',
        contentType: req.headers['content-type'] || '', status: r.status, answer,
      }));
      res.writeHead(r.status, { 'content-type': 'application/json' });
      res.end(answer);
    }).catch((e) => { res.writeHead(502); res.end(String(e)); });
    pending.push(done);
  });
});

// Work for the profilers to see: two distinct functions.
function burnA(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x += Math.sqrt(x + 1); return x; }
function burnB(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x += Math.sin(x + 1); return x; }

proxy.listen(0, '127.0.0.1', async () => {
  const port = proxy.address().port;
  Pyroscope.init({
    serverAddress: `http://127.0.0.1:${port}`,
    appName: 'kiln-node-peer',
    tags: { env: 'test', region: 'eu-1' },
    authToken: token || undefined,
    flushIntervalMs: 1000,
    wall: { collectCpuTime: true },
  });
  Pyroscope.start();
  const keep = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    burnA(20); burnB(10);
    keep.push(Buffer.alloc(4096, 1)); // heap for the heap profiler
    await new Promise((r) => setImmediate(r));
  }
  // The SDK's stop() can race its own next profiling round, which then
  // throws "Wall profiler is not started" from a timer: harmless once
  // stopped (the last profile was flushed by stop()).
  let stopped = false;
  process.on('uncaughtException', (e) => {
    if (stopped && /profiler is not started/.test(String(e))) return;
    console.error(e);
    process.exit(2);
  });
  stopped = true;
  await Pyroscope.stop();
  await new Promise((r) => setTimeout(r, 200));
  await Promise.all(pending);
  proxy.close();
  if (n === 0) { console.error('the SDK sent nothing'); process.exit(1); }
  console.log(`${n} requests recorded`);
});
