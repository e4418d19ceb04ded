// The web UI in a real browser: Playwright (playwright-core, pinned in
// ui/package-lock.json) drives Debian's Chromium headless against a real
// kiln holding real Go runtime/pprof profiles (see ui_browser.sh).
//
//   node ui_browser.mjs URL SHOTS_DIR OUT_DIR
//
// Every step asserts what a person would see and saves a screenshot.
import { createRequire } from 'node:module';
import { strict as assert } from 'node:assert';
import path from 'node:path';
import fs from 'node:fs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const require = createRequire(path.join(root, 'ui/package.json'));
const { chromium } = require('playwright-core');

const [url, shots, out] = process.argv.slice(2);
const TYPE = process.env.UI_TYPE;
fs.mkdirSync(shots, { recursive: true });

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true, colorScheme: 'light' });
await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url });
const page = await ctx.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
page.on('console', (m) => m.type() === 'error' && !/Failed to load resource/.test(m.text()) && errors.push(m.text())); // expected 4xx answers are shown in the UI

let n = 0;
async function shot(name) {
	n++;
	const file = path.join(shots, `${String(n).padStart(2, '0')}-${name}.png`);
	await page.screenshot({ path: file, fullPage: true });
	console.log('step', n, name, '->', path.basename(file));
}
const tid = (id) => page.locator(`[data-testid="${id}"]`);
const painted = () => page.evaluate(() => Number(document.body.dataset.painted || 0));
async function waitPaint(after) {
	await page.waitForFunction((a) => Number(document.body.dataset.painted || 0) > a, after, { timeout: 30000 });
}
const st = () => page.evaluate(() => window.__kiln.state());
// Zoom animation over and the last change drawn (rAF may lag on a loaded machine).
const drawn = (pg = page) => pg.waitForFunction(() => window.__kiln.icicle.idle, null, { timeout: 30000 });
const settled = () => page.evaluate(() => Number(document.body.dataset.settled || 0));
async function waitSettled(after) {
	await page.waitForFunction((a) => Number(document.body.dataset.settled || 0) > a, after, { timeout: 30000 });
}
const flameBinaries = () =>
	page.evaluate(() => {
		const f = window.__kiln.flame();
		if (!f) return [];
		const set = new Set();
		for (let i = 1; i < f.n; i++) if (f.strings[f.binary[i]]) set.add(f.strings[f.binary[i]]);
		return [...set];
	});
const flameInfo = () =>
	page.evaluate(() => {
		const f = window.__kiln.flame();
		return f && { n: f.n, total: f.total, diff: !!f.diff, cum0: f.cum[0] };
	});
async function clickNode(name) {
	const c = await page.evaluate((nm) => {
		const i = window.__kiln.widest(nm);
		return i > 0 ? window.__kiln.icicle.nodeCenter(i) : null;
	}, name);
	assert.ok(c, `node ${name} visible in the icicle graph`);
	await page.mouse.click(c.x, c.y);
	return c;
}
async function nodePixel(name) {
	// The colour at a node's left edge (labels are drawn from x+3).
	return page.evaluate((nm) => {
		const k = window.__kiln;
		const i = k.widest(nm);
		const f = k.flame();
		const c = k.icicle.nodeCenter(i);
		const canvas = document.querySelector('[data-testid="icicle-canvas"]');
		const r = canvas.getBoundingClientRect();
		const dpr = window.devicePixelRatio || 1;
		const w = (f.cum[i] / f.cum[0]) * r.width;
		const x = Math.round((c.x - r.left - w / 2 + 1.5) * dpr);
		const y = Math.round((c.y - r.top - 6) * dpr);
		const d = canvas.getContext('2d').getImageData(x, y, 1, 1).data;
		return [d[0], d[1], d[2]];
	}, name);
}

// 1. Empty start page tells what to do.
await page.goto(url + '/');
await tid('type-select-a').waitFor();
await page.waitForFunction(() => document.querySelectorAll('[data-testid="type-select-a"] option').length > 1);
assert.match(await tid('result-empty').innerText(), /Search/);
await shot('start');

// 2. Pick a profile type.
const options = await tid('type-select-a').locator('option').evaluateAll((os) => os.map((o) => o.value));
assert.ok(options.includes(TYPE), `type ${TYPE} offered (got ${options})`);
await tid('type-select-a').selectOption(TYPE);

// 3. Type a matcher with autocomplete: label name, then value.
const input = tid('matchers-a');
await input.click();
await input.type('no');
await tid('autocomplete-a').locator('li', { hasText: 'node' }).first().waitFor();
await page.keyboard.press('Enter');
assert.equal(await input.inputValue(), 'node="');
const values = tid('autocomplete-a').locator('li');
await values.filter({ hasText: 'n2' }).first().waitFor();
const shown = await values.allInnerTexts();
assert.ok(shown.some((s) => s.includes('n1')) && shown.some((s) => s.includes('n2')), `values n1, n2 suggested: ${shown}`);
await shot('autocomplete');
await values.filter({ hasText: 'n1' }).first().click();
assert.equal(await input.inputValue(), 'node="n1"');

// A syntax error is shown at the input with its position.
await input.fill('node="n1",,');
await tid('search-a').click();
await tid('query-error-a').waitFor({ state: 'visible' });
await shot('query-error');
assert.ok((await tid('query-error-a').innerText()).length > 5);
await input.fill('node="n1"');

// 4. Search: metrics graph (one series) and the merged icicle graph.
let p0 = await painted();
await tid('search-a').click();
await waitPaint(p0);
await page.waitForFunction(() => window.__kiln.graph('a').pointClient(0, 0) !== null);
const legend = await tid('metrics-legend').first().innerText();
assert.match(legend, /node="n1"/);
assert.doesNotMatch(legend, /node="n2"/);
const merged = await flameInfo();
assert.ok(merged.n > 10, 'icicle graph has frames');
assert.match(await tid('selection-a').innerText(), /Merged whole range/);
assert.ok((await page.evaluate(() => location.search)).includes('a.q=node'), 'URL holds the query');
// Colours by binary / package, with a legend (one Go binary here: its packages).
assert.ok((await tid('legend-binary').count()) >= 1, 'binary legend');
assert.ok((await tid('legend-package').count()) >= 2, 'package legend for a one-binary profile');
await shot('search');

// Time range: a custom range with no data says what to try; one around now finds the profiles.
async function customRange(fromAgoMin, toAgoMin) {
	await tid('range-select-a').selectOption('custom');
	await page.evaluate(([f, t]) => {
		const loc = (ms) => {
			const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
			return d.toISOString().slice(0, 16);
		};
		const set = (id, v) => {
			const el = document.querySelector(`[data-testid="${id}"]`);
			el.value = v;
			el.dispatchEvent(new Event('input', { bubbles: true }));
		};
		set('range-from-a', loc(Date.now() - f * 60000));
		set('range-to-a', loc(Date.now() - t * 60000));
	}, [fromAgoMin, toAgoMin]);
}
await customRange(3 * 1440, 2 * 1440);
let q0 = await settled();
await tid('search-a').click();
await waitSettled(q0);
await tid('graph-empty-a').waitFor({ state: 'visible' });
assert.match(await tid('graph-empty-a').innerText(), /widen the range/);
assert.match(await tid('result-empty').innerText(), /widen the time range/);
assert.ok((await st()).a.range.from > 0, 'custom range in the state');
await shot('empty-range');
await customRange(30, -5);
p0 = await painted();
await tid('search-a').click();
await waitPaint(p0);
assert.equal((await flameInfo()).total, merged.total, 'custom range around now: the same profiles');
// Back to the default preset (last 1 h).
await tid('range-select-a').selectOption('1h');
p0 = await painted();
await tid('search-a').click();
await waitPaint(p0);
await page.waitForFunction(() => window.__kiln.graph('a').pointClient(0, 1) !== null);
assert.equal((await st()).a.range.preset, '1h');

// 5. Click a metrics-graph point: that single profile.
p0 = await painted();
const pt = await page.evaluate(() => window.__kiln.graph('a').pointClient(0, 1));
await page.mouse.click(pt.x, pt.y);
await waitPaint(p0);
let s = await st();
assert.equal(s.a.mode, 'single');
assert.ok(s.a.time > 0);
const single = await flameInfo();
assert.ok(single.total > 0 && single.total < merged.total, `single ${single.total} < merged ${merged.total}`);
assert.match(await tid('selection-a').innerText(), /Single profile at/);
await shot('point');
// Hovering a legend entry highlights its series (the other ones fade).
await tid('metrics-legend').first().locator('.legend-item').first().hover();
await page.waitForFunction(() => document.querySelector('[data-testid="metrics-legend"] .legend-item.focused') !== null);
await page.mouse.move(5, 5);

// 6. Zoom into a frame; tooltip; breadcrumb; Esc resets.
await clickNode('main.hashAlpha');
await page.waitForFunction(() => window.__kiln.state().focus.includes('main.hashAlpha'));
await drawn();
assert.match(await tid('breadcrumb').innerText(), /main\.hashAlpha/);
const c2 = await page.evaluate(() => window.__kiln.icicle.nodeCenter(window.__kiln.widest('main.hashAlpha')));
await page.mouse.move(c2.x - 20, c2.y);
await page.mouse.move(c2.x, c2.y);
await tid('icicle-tooltip').waitFor({ state: 'visible' });
const tip = await tid('icicle-tooltip').innerText();
assert.match(tip, /main\.hashAlpha/);
assert.match(tip, /main\.go:\d+/);
assert.match(tip, /total/);
assert.match(tip, /self/);
assert.ok((await page.evaluate(() => location.search)).includes('focus='), 'URL holds the zoom');
await shot('zoom');
await page.mouse.move(5, 5);
await page.keyboard.press('Escape');
await page.waitForFunction(() => window.__kiln.state().focus.length === 0);
await drawn();
// Ctrl + wheel zooms around the pointer, a drag pans; neither changes the focus; Esc goes back.
const box = await tid('icicle-canvas').boundingBox();
const full = await page.evaluate(() => window.__kiln.icicle.view.w);
await page.mouse.move(box.x + box.width / 2, box.y + 9);
await page.keyboard.down('Control');
await page.mouse.wheel(0, -400);
await page.keyboard.up('Control');
await page.waitForFunction((w) => window.__kiln.icicle.view.w < w * 0.8, full, { timeout: 30000 });
await drawn();
const zoomed = await page.evaluate(() => window.__kiln.icicle.view);
assert.ok(zoomed.x0 > 0, `zoomed around the pointer (window ${JSON.stringify(zoomed)})`);
await page.mouse.down();
await page.mouse.move(box.x + box.width / 2 + 60, box.y + 9, { steps: 4 });
await page.mouse.move(box.x + box.width / 2 + 120, box.y + 9, { steps: 4 });
await page.mouse.up();
await drawn();
const panned = await page.evaluate(() => window.__kiln.icicle.view);
assert.ok(panned.x0 < zoomed.x0 && Math.abs(panned.w - zoomed.w) < 1e-6 * zoomed.w, `dragging right pans left: ${JSON.stringify(panned)}`);
assert.equal((await st()).focus.length, 0, 'a drag is not a click');
await page.mouse.move(5, 5);
await page.keyboard.press('Escape');
await page.waitForFunction((w) => window.__kiln.icicle.idle && window.__kiln.icicle.view.w === w && window.__kiln.icicle.view.x0 === 0, full, { timeout: 30000 });

// 7. Search a function: `/` focuses the search box; matches are highlighted with their share.
await page.keyboard.press('/');
assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'fn-search');
await page.keyboard.type('sortBeta');
await page.waitForFunction(() => /%/.test(document.querySelector('[data-testid="search-share"]').textContent));
const share = await tid('search-share').innerText();
assert.match(share, /of total/);
await drawn();
const dimmed = await nodePixel('main.hashAlpha');
const lit = await nodePixel('main.sortBeta');
assert.ok(Math.max(...lit) - Math.min(...lit) > Math.max(...dimmed) - Math.min(...dimmed), `match ${lit} more saturated than non-match ${dimmed}`);
await shot('search-function');
await tid('fn-search').fill('');
await tid('fn-search').dispatchEvent('input');

// 8. Table view, sorting.
await tid('view-table').click();
await page.locator('[data-testid="table-view"] tbody tr').first().waitFor();
await tid('th-cum').click();
const cumDesc = await page.evaluate(() => {
	const rows = window.__kiln.top().rows;
	const names = [...document.querySelectorAll('[data-testid="table-view"] tbody tr td.fn')].map((td) => td.textContent);
	const byName = new Map(rows.map((r) => [r.name, r.cum]));
	return names.map((n) => byName.get(n));
});
assert.ok(cumDesc.length > 3);
for (let i = 1; i < cumDesc.length; i++) assert.ok(cumDesc[i - 1] >= cumDesc[i], 'sorted by cum, descending');
await tid('th-name').click();
const names = await page.locator('[data-testid="table-view"] tbody td.fn').allInnerTexts();
assert.deepEqual(names, [...names].sort((a, b) => a.localeCompare(b)), 'sorted by name');
assert.equal((await st()).sort, 'name');
await shot('table');
// Filter, then click a row: Both view with the function focused.
await tid('table-filter').fill('sortBeta');
await page.waitForFunction(() => document.querySelectorAll('[data-testid="table-view"] tbody tr').length === 1);
await page.locator('[data-testid="table-view"] tbody tr').first().click();
await page.waitForFunction(() => window.__kiln.state().view === 'both' && window.__kiln.state().focus.at(-1) === 'main.sortBeta');
await drawn();
await shot('both');

// 9. Merge the whole range.
p0 = await painted();
await tid('merge-a').click();
await waitPaint(p0);
assert.equal((await flameInfo()).total, merged.total);
assert.match(await tid('selection-a').innerText(), /Merged whole range/);
await tid('view-icicle').click();
await tid('fn-search').fill(''); // the row click searched for main.sortBeta
await shot('merge');

// 10. Compare two ranges: A = first profile (hash-heavy), B = second (sort-heavy).
await tid('compare-toggle').click();
await tid('side-b').waitFor({ state: 'visible' });
await page.waitForFunction(() => window.__kiln.graph('b').pointClient(0, 1) !== null);
async function dragAround(side, idx) {
	const q = await page.evaluate(([sd, i]) => window.__kiln.graph(sd).pointClient(0, i), [side, idx]);
	const p = await painted();
	await page.mouse.move(q.x - 12, q.y + 5);
	await page.mouse.down();
	await page.mouse.move(q.x, q.y + 5, { steps: 3 });
	await page.mouse.move(q.x + 12, q.y + 5, { steps: 3 });
	await page.mouse.up();
	await waitPaint(p);
}
await dragAround('a', 0);
await dragAround('b', 1);
s = await st();
assert.ok(s.compare && s.a.mode === 'merge' && s.a.start && s.b.start && s.b.start > s.a.end, 'two ranges selected');
const d = await flameInfo();
assert.ok(d.diff, 'diff report');
await drawn();
const worse = await nodePixel('main.sortBeta');
const better = await nodePixel('main.hashAlpha');
assert.ok(worse[0] > worse[1] + 30, `sortBeta (more in B) is red: ${worse}`);
assert.ok(better[1] > better[0] + 30, `hashAlpha (less in B) is green: ${better}`);
assert.match(await tid('legend').innerText(), /better.*worse/s);
await shot('compare');
await tid('view-table').click();
await tid('th-diff_cum').waitFor();
await tid('table-filter').fill('');
await page.locator('[data-testid="table-view"] tbody td.worse').first().waitFor();
await page.locator('[data-testid="table-view"] tbody td.better').first().waitFor();
await shot('compare-table');
await tid('view-icicle').click();
await clickNode('main.nested');
await page.waitForFunction(() => window.__kiln.state().focus.length > 0);
await drawn();

// 11. Share: copy the link, reload it, get the same view; download pprof and folded.
await tid('copy-link').click();
await page.waitForFunction(() => document.querySelector('[data-testid="share-link"]').value.startsWith('http'));
const link = await tid('share-link').inputValue();
const clip = await page.evaluate(() => navigator.clipboard.readText().catch(() => ''));
assert.equal(clip, link, 'link copied to the clipboard');
const before = await st();
const beforeFlame = await flameInfo();
const dl = page.waitForEvent('download');
await tid('download-pprof').click();
const download = await dl;
await download.saveAs(path.join(out, 'diff.pb.gz'));
const page2 = await ctx.newPage();
page2.on('pageerror', (e) => errors.push(e.message));
await page2.goto(link);
await page2.waitForFunction(() => Number(document.body.dataset.painted || 0) > 0, null, { timeout: 30000 });
await drawn(page2);
const after = await page2.evaluate(() => window.__kiln.state());
assert.deepEqual(after.focus, before.focus, 'same zoom');
assert.equal(after.compare, true);
assert.equal(after.view, before.view);
assert.deepEqual({ ...after.a, range: undefined }, { ...before.a, range: undefined });
assert.deepEqual({ ...after.b, range: undefined }, { ...before.b, range: undefined });
assert.deepEqual(await page2.evaluate(() => { const f = window.__kiln.flame(); return { n: f.n, total: f.total, diff: !!f.diff, cum0: f.cum[0] }; }), beforeFlame, 'same profile');
assert.match(await page2.locator('[data-testid="breadcrumb"]').innerText(), /main\.nested/);
await page2.screenshot({ path: path.join(shots, `${String(++n).padStart(2, '0')}-shared-link.png`), fullPage: true });
console.log('step', n, 'shared-link');
await page2.close();

// Stop comparing; download the single-side merged profile as pprof and folded.
p0 = await painted();
await tid('compare-toggle').click();
await page.waitForFunction(() => !window.__kiln.state().compare);
await waitPaint(p0);
for (const [id, file] of [
	['download-pprof', 'merged.pb.gz'],
	['download-folded', 'merged.folded'],
]) {
	const w = page.waitForEvent('download');
	await tid(id).click();
	await (await w).saveAs(path.join(out, file));
}
fs.writeFileSync(path.join(out, 'merged.total'), String((await flameInfo()).total));

// 11b. A slow query shows a loading indicator, then a progress note that
// says what to do; both go away when the answer arrives. The browser holds
// the flame-graph request back until the note has been seen.
let release;
const held = new Promise((r) => (release = r));
const flameReq = (u) => u.pathname === '/api/v1/query' && u.searchParams.get('report') === 'flamegraph';
await page.route(
	flameReq,
	async (route) => {
		await held;
		await route.continue();
	},
);
p0 = await painted();
await tid('search-a').click();
const profLoading = tid('result').locator('[data-testid="loading"]');
await profLoading.waitFor({ state: 'visible' });
assert.match(await profLoading.innerText(), /Loading profile/);
await tid('loading-note').waitFor({ state: 'visible', timeout: 15000 });
assert.match(await tid('loading-note').innerText(), /still working \(\d+s\).*narrow the time range/);
await shot('slow-query');
release();
await waitPaint(p0);
await page.unroute(flameReq);
assert.ok(await profLoading.isHidden(), 'loading indicator hidden after the answer');
assert.equal(await tid('loading-note').count(), 0, 'progress note removed');
assert.ok((await flameInfo()).total > 0, 'the held query paints its profile');

// 12. Dark theme.
await tid('theme-toggle').click();
assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
await drawn();
await shot('dark-theme');
await tid('theme-toggle').click();

// 13. Wide screen.
await page.setViewportSize({ width: 2200, height: 1000 });
await page.waitForFunction(() => document.querySelector('[data-testid="icicle-canvas"]').getBoundingClientRect().width > 1800, null, { timeout: 30000 });
await drawn();
await shot('wide');
await page.setViewportSize({ width: 1280, height: 800 });

// 14. Targets page.
await tid('nav-targets').click();
await tid('page-targets').waitFor({ state: 'visible' });
await page.waitForFunction(() => !document.querySelector('[data-testid="page-targets"] .loading'));
// kiln scrapes itself (up) and a closed port (down); the page refreshes itself.
const selfJob = tid('job-kiln-self');
await selfJob.locator('[data-testid="health"]', { hasText: 'up' }).first().waitFor({ timeout: 60000 });
const selfTxt = await selfJob.innerText();
assert.match(selfTxt, /debug\/pprof\/profile/);
assert.match(selfTxt, /instance="127\.0\.0\.1:\d+"/);
assert.match(selfTxt, /env="ui-test"/);
assert.match(selfTxt, /ago|just now/);
const offline = tid('job-offline');
await offline.locator('[data-testid="health"]', { hasText: 'down' }).first().waitFor({ timeout: 60000 });
assert.match(await offline.innerText(), /connection refused/);
assert.match(await tid('targets-summary').innerText(), /of \d+ up/);
assert.ok((await page.evaluate(() => location.search)).includes('page=targets'));
await shot('targets');

// 15. Hide frames by binary, on kiln's own CPU profile (scraped above: the
// kiln binary and its shared libraries). The profile grows with every scrape;
// wait until it spans two binaries (kiln did real work serving this test).
// "profiles →" on the kiln-self target opens its CPU profiles, selected by the target's labels.
await selfJob.locator('[data-testid="open-profiles"]').first().click();
await page.waitForFunction(() => {
	const s = window.__kiln.state();
	return s.page === 'profiles' && s.a.type === 'process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta' && s.a.matchers.includes('job="kiln-self"');
}, null, { timeout: 30000 });
assert.match(await tid('matchers-a').inputValue(), /instance="127\.0\.0\.1:\d+"/);
let bins = [];
for (let tries = 0; tries < 30; tries++) {
	q0 = await settled();
	await tid('search-a').click();
	await waitSettled(q0);
	bins = await flameBinaries();
	if (bins.length >= 2) break;
	// Give kiln work to profile while the next scrape runs.
	await page.evaluate(async (t) => {
		for (let k = 0; k < 20; k++) await fetch(`/api/v1/query?query=${encodeURIComponent(t + '{}')}&start=${Date.now() - 3600e3}&end=${Date.now()}&mode=merge&report=flamegraph`);
	}, TYPE);
	await page.waitForTimeout(2000);
}
assert.ok(bins.length >= 2, `kiln's profile spans two binaries: ${bins}`);
const legendBins = await tid('legend-binary').evaluateAll((bs) => bs.map((b) => b.title.replace(/^hide frames of /, '')));
const victim = legendBins.find((b) => b !== '(unknown)' && bins.includes(b) && legendBins.indexOf(b) > 0) ?? legendBins.find((b) => b !== '(unknown)');
assert.ok(victim, `a binary to hide among ${legendBins}`);
q0 = await settled();
await tid('legend-binary').and(page.locator(`[title="hide frames of ${victim}"]`)).click();
await waitSettled(q0);
assert.ok(!(await flameBinaries()).includes(victim), `${victim} hidden`);
assert.ok((await tid('hidden-chip').innerText()).includes(victim), 'a chip to show it again');
assert.ok((await page.evaluate(() => location.search)).includes('hide='), 'URL holds the hidden binaries');
await shot('hide-binary');
q0 = await settled();
await tid('hidden-chip').click();
await waitSettled(q0);
assert.ok((await flameBinaries()).includes(victim), `${victim} shown again`);

assert.deepEqual(errors, [], 'no page errors');
await browser.close();
console.log('ui_browser: all steps passed');
