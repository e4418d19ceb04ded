// nodeprof.js — a Node.js pprof producer and decoder for Kiln's tests.
//
//   node nodeprof.js cpu OUT.pb.gz EXPECTED.folded [SEED]
//       Profiles a small workload with the built-in inspector, converts the
//       V8 CPU profile to pprof with pprof-format, and writes the folded
//       stacks computed straight from V8's call tree (not from the pprof) for
//       the default (last) sample type.
//   node nodeprof.js fold FILE.pb.gz [TYPE]
//       Decodes FILE with pprof-format and prints its folded stacks.
//
// V8's pseudo-frames "(program)", "(idle)", "(garbage collector)" become
// locations without lines (like an unsymbolized native frame): their folded
// name is the address, 0x<hex>.
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const inspector = require('inspector');
const pf = require('pprof-format');

function post(session, method, params) {
  return new Promise((resolve, reject) => {
    session.post(method, params || {}, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

// ---- workload: named functions, recursion, two phases ----
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function sortNumbers(seed) {
  const xs = [];
  let x = seed;
  for (let i = 0; i < 20000; i++) { x = (x * 1103515245 + 12345) % 2147483648; xs.push(x); }
  return xs.sort((a, b) => a - b)[0];
}
function buildStrings() {
  let s = '';
  for (let i = 0; i < 2000; i++) s += String.fromCharCode(65 + (i % 26));
  return s.length;
}
function workload(ms, seed) {
  const end = Date.now() + ms;
  let sink = 0;
  while (Date.now() < end) {
    sink += fib(18 + (seed % 3));
    sink += sortNumbers(seed++);
    sink += buildStrings();
  }
  return sink;
}

function frameName(node) {
  const name = node.callFrame.functionName;
  if (name.startsWith('(') && node.callFrame.url === '') return null; // pseudo-frame
  return name === '' ? '(anonymous)' : name;
}
const addressOf = (node) => 0x1000 + node.id;

async function cpu(out, expectedPath, seed) {
  const session = new inspector.Session();
  session.connect();
  await post(session, 'Profiler.enable');
  await post(session, 'Profiler.setSamplingInterval', { interval: 200 });
  await post(session, 'Profiler.start');
  const started = Date.now();
  workload(1500, seed);
  const { profile } = await post(session, 'Profiler.stop');
  session.disconnect();

  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children || []) parent.set(c, n.id);
  const rootId = profile.nodes[0].id;

  // Per sample: weight = time since the previous sample, in nanoseconds.
  const weights = profile.samples.map((_, i) => Math.max(0, profile.timeDeltas[i] || 0) * 1000);

  // Expected folded stacks from the V8 tree: root first, "(root)" left out.
  const expected = new Map();
  // pprof: one location per V8 node, stacks leaf first.
  const strings = new pf.StringTable();
  const functions = new Map(); // "name\0url" -> id
  const fnList = [], locList = [];
  const locOf = new Map();
  function locationFor(node) {
    if (locOf.has(node.id)) return locOf.get(node.id);
    const name = frameName(node);
    const id = locList.length + 1;
    const loc = { id, address: addressOf(node), line: [] };
    if (name !== null) {
      const key = name + '\0' + node.callFrame.url;
      if (!functions.has(key)) {
        functions.set(key, fnList.length + 1);
        fnList.push(new pf.Function({
          id: fnList.length + 1,
          name: strings.dedup(name),
          systemName: strings.dedup(name),
          filename: strings.dedup(node.callFrame.url),
        }));
      }
      loc.line.push(new pf.Line({ functionId: functions.get(key), line: node.callFrame.lineNumber + 1 }));
    }
    locList.push(new pf.Location(loc));
    locOf.set(node.id, id);
    return id;
  }
  const samples = [];
  profile.samples.forEach((leafId, i) => {
    const stack = []; // leaf first
    const names = [];
    for (let id = leafId; id !== rootId && id !== undefined; id = parent.get(id)) {
      const node = nodes.get(id);
      stack.push(locationFor(node));
      const name = frameName(node);
      names.push(name === null ? '0x' + addressOf(node).toString(16) : name);
    }
    if (stack.length === 0) return;
    const key = names.reverse().join(';');
    expected.set(key, (expected.get(key) || 0) + weights[i]);
    samples.push(new pf.Sample({
      locationId: stack,
      value: [1, weights[i]],
      label: [new pf.Label({ key: strings.dedup('thread'), str: strings.dedup('main') })],
    }));
  });
  const p = new pf.Profile({
    sampleType: [
      new pf.ValueType({ type: strings.dedup('samples'), unit: strings.dedup('count') }),
      new pf.ValueType({ type: strings.dedup('cpu'), unit: strings.dedup('nanoseconds') }),
    ],
    sample: samples,
    location: locList,
    function: fnList,
    stringTable: strings,
    timeNanos: BigInt(started) * 1000000n,
    durationNanos: (profile.endTime - profile.startTime) * 1000,
    periodType: new pf.ValueType({ type: strings.dedup('cpu'), unit: strings.dedup('nanoseconds') }),
    period: 200000,
  });
  fs.writeFileSync(out, zlib.gzipSync(p.encode()));
  const lines = [...expected].filter(([, v]) => v !== 0).map(([k, v]) => `${k} ${v}`);
  fs.writeFileSync(expectedPath, lines.join('\n') + (lines.length ? '\n' : ''));
}

function fold(file, typeName) {
  let data = fs.readFileSync(file);
  if (data[0] === 0x1f && data[1] === 0x8b) data = zlib.gunzipSync(data);
  const p = pf.Profile.decode(data);
  const str = (i) => p.stringTable.strings[Number(i)];
  let ti = p.sampleType.length - 1;
  if (typeName) ti = p.sampleType.findIndex((t) => str(t.type) === typeName);
  if (ti < 0) throw new Error('no sample type ' + typeName);
  const fns = new Map(p.function.map((f) => [String(f.id), f]));
  const locs = new Map(p.location.map((l) => [String(l.id), l]));
  const sums = new Map();
  for (const s of p.sample) {
    const frames = [];
    for (let i = s.locationId.length - 1; i >= 0; i--) {
      const l = locs.get(String(s.locationId[i]));
      if (l.line.length === 0) { frames.push('0x' + BigInt(l.address).toString(16)); continue; }
      for (let j = l.line.length - 1; j >= 0; j--) frames.push(str(fns.get(String(l.line[j].functionId)).name));
    }
    const key = frames.join(';');
    sums.set(key, (sums.get(key) || 0n) + BigInt(s.value[ti]));
  }
  for (const [k, v] of sums) if (v !== 0n) process.stdout.write(`${k} ${v}\n`);
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'cpu') {
  cpu(args[0], args[1], Number(args[2] || 1)).catch((e) => { console.error(e); process.exit(1); });
} else if (mode === 'fold') {
  fold(args[0], args[1]);
} else {
  console.error('usage: nodeprof.js cpu OUT EXPECTED [SEED] | fold FILE [TYPE]');
  process.exit(2);
}
