// bench-ui driver: headless Chromium (Playwright) against a real kiln.
//   node bench_ui.mjs URL TYPE LABEL... -- PEERURL...
// For each size label: Search → painted icicle graph (median of runs), the
// client's share (JSON parse + layout + first draw), API bytes per node, and
// frame times while zooming. Peer: go tool pprof -http's flame graph page
// for the same profile, load → drawn.
import { createRequire } from 'node:module';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const require = createRequire(path.join(root, 'ui/package.json'));
const { chromium } = require('playwright-core');

const args = process.argv.slice(2);
const sep = args.indexOf('--');
const [url, type, ...sizes] = sep >= 0 ? args.slice(0, sep) : args;
const peers = sep >= 0 ? args.slice(sep + 1) : [];
const RUNS = Number(process.env.BENCH_RUNS || 3);

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const results = [];

for (const size of sizes) {
	const qs = new URLSearchParams({ 'a.type': type, 'a.q': `size="${size}"`, 'a.range': '1h', 'a.mode': 'merge' });
	await page.goto(`${url}/?${qs}`);
	await page.waitForFunction(() => (window.__kilnPerf?.searches?.length ?? 0) > 0, null, { timeout: 300000 });
	const runs = [];
	for (let r = 0; r < RUNS; r++) {
		const before = await page.evaluate(() => {
			performance.clearResourceTimings();
			return window.__kilnPerf.searches.length;
		});
		await page.click('[data-testid="search-a"]');
		await page.waitForFunction((b) => window.__kilnPerf.searches.length > b, before, { timeout: 300000 });
		runs.push(
			await page.evaluate(() => {
				// The server's own split of the flame graph request (its Server-Timing header):
				// wall ms of merge (store → tree), tree (finish), encode (JSON), and its CPU ms.
				const e = performance
					.getEntriesByType('resource')
					.filter((x) => x.name.includes('/api/v1/query') && x.name.includes('report=flamegraph'))
					.at(-1);
				const server = {};
				for (const t of e?.serverTiming ?? []) server[t.name] = t.duration;
				return { ...window.__kilnPerf.searches.at(-1), server };
			}),
		);
	}
	// Zoom: into the widest frame at depths 8, 9, 10, then back out to the root.
	const frames = await page.evaluate(async () => {
		const k = window.__kiln;
		const f = k.flame();
		window.__kilnPerf.frames = [];
		const wait = () => new Promise((r) => setTimeout(r, 320));
		const widestAt = (d, inside) => {
			let best = -1;
			for (let i = inside + 1; i < f.end[inside]; i++) if (f.depth[i] === d && (best < 0 || f.cum[i] > f.cum[best])) best = i;
			return best;
		};
		let cur = 0;
		for (const d of [7, 8, 9, 10]) {
			const i = widestAt(d, cur);
			if (i < 0) break;
			k.icicle.zoomTo(i);
			await wait();
			cur = i;
		}
		k.icicle.zoomTo(0);
		await wait();
		return window.__kilnPerf.frames;
	});
	// Wheel zoom and pan at the root: 40 Ctrl+wheel steps in, 40 horizontal wheel steps, one per frame.
	const panFrames = await page.evaluate(async () => {
		const c = document.querySelector('[data-testid="icicle-canvas"]');
		const r = c.getBoundingClientRect();
		const raf = () => new Promise((res) => requestAnimationFrame(() => res()));
		window.__kilnPerf.frames = [];
		const at = { clientX: r.left + r.width / 2, clientY: r.top + 9, bubbles: true, cancelable: true };
		for (let k = 0; k < 40; k++) {
			c.dispatchEvent(new WheelEvent('wheel', { ...at, deltaY: -60, ctrlKey: true }));
			await raf();
		}
		for (let k = 0; k < 40; k++) {
			c.dispatchEvent(new WheelEvent('wheel', { ...at, deltaX: k < 20 ? 80 : -80 }));
			await raf();
		}
		await raf();
		window.__kiln.icicle.reset();
		return window.__kilnPerf.frames.slice(0, 80);
	});
	const last = runs.at(-1);
	results.push({
		size,
		nodes: last.nodes,
		searchToPaint: med(runs.map((x) => x.ms)),
		client: med(runs.map((x) => x.parseMs + x.drawMs)),
		fetch: med(runs.map((x) => x.fetchMs)),
		server: med(runs.map((x) => (x.server.merge ?? NaN) + (x.server.tree ?? NaN) + (x.server.encode ?? NaN))),
		serverCpu: med(runs.map((x) => x.server.cpu ?? NaN)),
		json: med(runs.map((x) => x.jsonMs)),
		layout: med(runs.map((x) => x.parseMs)),
		draw: med(runs.map((x) => x.drawMs)),
		bytesPerNode: last.bytes / last.nodes,
		mb: last.bytes / 1e6,
		zoomMedian: med(frames),
		zoomP95: pct(frames, 0.95),
		zoomMax: Math.max(...frames),
		frames: frames.length,
		panMedian: med(panFrames),
		panP95: pct(panFrames, 0.95),
		panMax: Math.max(...panFrames),
		panN: panFrames.length,
	});
}

const peerResults = [];
for (const pu of peers) {
	const [label, purl] = pu.split('=');
	const t0 = Date.now();
	let ms = null;
	try {
		await page.goto(purl, { timeout: 180000 });
		await page.waitForFunction(() => document.querySelectorAll('svg g, #stack-chart, .boxes').length > 0, null, { timeout: 180000 });
		await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
		ms = Date.now() - t0;
	} catch (e) {
		ms = null;
	}
	peerResults.push({ label, ms });
}
await browser.close();

const f = (x, d = 1) => (x == null ? 'timeout' : Number.isNaN(x) ? '-' : x.toFixed(d));
console.log('\nui: Search → painted icicle graph (headless Chromium 1280x800, median of ' + RUNS + ')');
console.log('size   nodes     search→paint ms  fetch ms  (server ms, cpu ms)  JSON.parse ms  layout ms  first draw ms  API MB  bytes/node  zoom frame ms (median/p95/max, n)  wheel zoom+pan frame ms (median/p95/max, n)');
for (const r of results) {
	console.log(
		`${r.size.padEnd(6)} ${String(r.nodes).padEnd(9)} ${f(r.searchToPaint).padStart(15)}  ${f(r.fetch).padStart(8)}  ${`(${f(r.server)}, ${f(r.serverCpu)})`.padStart(19)}  ${f(r.json).padStart(13)}  ${f(r.layout).padStart(9)}  ${f(r.draw).padStart(13)}  ${f(r.mb, 2).padStart(6)}  ${f(r.bytesPerNode).padStart(10)}  ${f(r.zoomMedian, 2)}/${f(r.zoomP95, 2)}/${f(r.zoomMax, 2)}, ${r.frames}  ${f(r.panMedian, 2)}/${f(r.panP95, 2)}/${f(r.panMax, 2)}, ${r.panN}`,
	);
}
if (peerResults.length) {
	console.log('\npeer: go tool pprof -http flame graph page, navigation → drawn (same profiles)');
	for (const p of peerResults) {
		const mine = results.find((r) => r.size === p.label);
		const ratio = p.ms != null && mine ? ` (kiln ${(p.ms / mine.searchToPaint).toFixed(1)}x faster)` : '';
		console.log(`${p.label.padEnd(6)} ${f(p.ms, 0)} ms${ratio}`);
	}
}
