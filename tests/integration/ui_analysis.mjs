// The UI's analysis tools in a real browser (see ui_analysis.sh): Playwright
// drives Debian's Chromium headless against a real kiln.
//
//   node ui_analysis.mjs URL SHOTS_DIR
import { createRequire } from 'node:module';
import { strict as assert } from 'node:assert';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const require = createRequire(path.join(root, 'ui/package.json'));
const { chromium } = require('playwright-core');

const [url, shots] = process.argv.slice(2);
const TYPE = process.env.UI_TYPE;
const T0 = Number(process.env.UI_T0);
const A = [T0, T0 + 300000 - 1];
const B = [T0 + 300000, T0 + 600000 - 1];

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' });
const page = await ctx.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
page.on('console', (m) => m.type() === 'error' && !/Failed to load resource/.test(m.text()) && errors.push(m.text()));

let n = 0;
async function shot(name) {
	n++;
	await page.screenshot({ path: path.join(shots, `${String(n).padStart(2, '0')}-${name}.png`), fullPage: true });
	console.log('step', n, name);
}
const tid = (id) => page.locator(`[data-testid="${id}"]`);
const settled = () => page.evaluate(() => Number(document.body.dataset.settled || 0));
async function waitSettled(after) {
	await page.waitForFunction((a) => Number(document.body.dataset.settled || 0) > a, after, { timeout: 30000 });
}
const names = (which = 'flame') =>
	page.evaluate((w) => {
		const f = window.__kiln[w]();
		if (!f) return null;
		const out = [];
		for (let i = 0; i < f.n; i++) if (f.cum[i] > 0) out.push(`${f.depth[i]}:${f.strings[f.name[i]]}`);
		return out;
	}, which);

// 1. A fresh page offers a profile type before any search, by readable name.
await page.goto(url);
await page.waitForFunction(() => document.querySelector('[data-testid="type-select-a"]')?.value);
const opts = await page.evaluate(() => [...document.querySelector('[data-testid="type-select-a"]').options].map((o) => [o.value, o.textContent, o.title]));
assert.match(await tid('type-select-a').inputValue(), /^process_cpu:/, 'a CPU type is offered first');
const cpu = opts.find((o) => o[0] === TYPE);
assert.ok(cpu, `${TYPE} listed`);
assert.equal(cpu[1], 'CPU time · process_cpu');
assert.equal(cpu[2], TYPE, 'the raw type is the tooltip');
await shot('type-offered');

// 2. Search: the legend names only what differs between the two series, and
// the x axis spans the whole hour asked for, not the 10 minutes of data.
await tid('type-select-a').selectOption(TYPE);
let s0 = await settled();
await tid('search-a').click();
await waitSettled(s0);
await page.waitForFunction(() => window.__kiln.graph('a').pointClient(0, 0) !== null);
const legend = await tid('metrics-legend').first().innerText();
assert.match(legend, /version="v1"/);
assert.match(legend, /version="v2"/);
assert.doesNotMatch(legend, /job=/, 'the shared label is left out');
const [xmin, xmax] = await page.evaluate(() => {
	const u = window.__kiln.graph('a').u;
	return [u.scales.x.min, u.scales.x.max];
});
const now = Date.now();
assert.ok(xmin <= now - 3600e3 + 120e3, `x axis starts at the range's start (${new Date(xmin).toISOString()})`);
assert.ok(xmax >= now - 120e3, 'x axis ends at the range end');
await shot('legend-and-axis');

// 3. Frame filters: focus on f1 and f2; the server leaves f3 out.
await tid('frame-filter-focus').fill('^f[12]$');
s0 = await settled();
await tid('frame-filters-apply').click();
await waitSettled(s0);
let nm = await names();
assert.ok(nm.includes('2:f1') && nm.includes('2:f2'), nm.join(' '));
assert.ok(!nm.some((x) => x.endsWith(':f3')), 'f3 focused away: ' + nm.join(' '));
assert.match(await page.evaluate(() => location.search), /ff=/, 'the filter is in the link');
await shot('focus-filter');

// 4. A bad pattern: the server's message, and nothing of the last answer left.
await tid('frame-filter-focus').fill('f1(');
s0 = await settled();
await tid('frame-filter-focus').press('Enter');
await waitSettled(s0);
assert.match(await tid('result-error').innerText(), /focus: invalid regular expression at byte 3/);
assert.equal(await tid('summary').innerText(), '');
assert.equal(await tid('legend').innerText(), '');
assert.equal(await tid('download-pprof').getAttribute('href'), null);
await shot('bad-pattern');
s0 = await settled();
await tid('frame-filters-clear').click();
await waitSettled(s0);
assert.equal(await tid('result-error').isVisible(), false);

// 5. Sandwich: right click f1; its callers above (f1, then main), its
// callees below (f1 alone: it is a leaf).
const c = await page.evaluate(() => window.__kiln.icicle.nodeCenter(window.__kiln.widest('f1')));
assert.ok(c, 'f1 is drawn');
s0 = await settled();
await page.mouse.click(c.x, c.y, { button: 'right' });
await waitSettled(s0);
await page.waitForFunction(() => window.__kiln.callers() !== null);
assert.equal(await tid('sandwich-bar').isVisible(), true);
assert.match(await tid('sandwich-title').innerText(), /Sandwich of f1/);
nm = await names();
assert.deepEqual(nm.filter((x) => !x.startsWith('0:')), ['1:f1']);
nm = await names('callers');
assert.deepEqual(nm.filter((x) => !x.startsWith('0:')), ['1:f1', '2:main']);
assert.match(await page.evaluate(() => location.search), /sw=f1/);
await shot('sandwich');
s0 = await settled();
await tid('sandwich-close').click();
await waitSettled(s0);
assert.equal(await tid('sandwich-bar').isVisible(), false);

// 6. Compare before (v1's five minutes) with after: the ranked table puts f1
// first as slower and f2 as faster; clicking a row finds it in the graph.
const q = new URLSearchParams({
	'a.type': TYPE, 'a.q': 'job="deploy"', 'a.range': `${A[0]}-${A[1]}`, 'a.mode': 'merge',
	compare: '1',
	'b.type': TYPE, 'b.q': 'job="deploy"', 'b.range': `${B[0]}-${B[1]}`, 'b.mode': 'merge',
});
await page.goto(url + '/?' + q.toString());
await page.waitForFunction(() => document.querySelectorAll('[data-testid="regression-row"]').length > 0, null, { timeout: 30000 });
const rows = await tid('regression-row').allInnerTexts();
assert.match(rows[0], /^slower\s+f1\s/, rows.join(' | '));
assert.ok(rows.some((r) => /^faster\s+f2\s/.test(r)), rows.join(' | '));
assert.match(await tid('regression-status').innerText(), /1 function slower with confidence/);
await tid('regression-row').first().click();
assert.equal(await tid('fn-search').inputValue(), 'f1');
assert.equal((await page.evaluate(() => window.__kiln.state())).search, 'f1');
await shot('regression-table');

// 7. Ranges of unequal length: the diff scales A by B's length over A's
// unless asked for absolute values.
q.set('a.range', `${A[0]}-${A[0] + 150000 - 1}`);
await page.goto(url + '/?' + q.toString());
await page.waitForFunction(() => Number(document.body.dataset.painted || 0) > 0, null, { timeout: 30000 });
assert.match(await tid('summary').innerText(), /A ×2\.00/);
assert.equal(await tid('diff-normalize').inputValue(), '');
let s1 = await settled();
await tid('diff-normalize').selectOption('absolute');
await waitSettled(s1);
assert.doesNotMatch(await tid('summary').innerText(), /×/);
assert.match(await page.evaluate(() => location.search), /norm=absolute/);
await shot('diff-absolute');

// 8. Sum by and group by: one line for the job; one first-level frame per version.
await page.goto(url + '/?' + new URLSearchParams({ 'a.type': TYPE, 'a.q': 'job="deploy"', 'a.range': `${A[0]}-${B[1]}`, 'a.mode': 'merge' }).toString());
await page.waitForFunction(() => Number(document.body.dataset.painted || 0) > 0, null, { timeout: 30000 });
await page.waitForFunction(() => document.querySelectorAll('[data-testid="metrics-legend"] .legend-item').length === 2);
await tid('sum-by-a').fill('job');
await tid('sum-by-a').press('Enter');
await page.waitForFunction(() => document.querySelectorAll('[data-testid="metrics-legend"] .legend-item').length === 1);
assert.match(await tid('metrics-legend').first().innerText(), /job="deploy"/);
s1 = await settled();
await tid('group-by').fill('version');
await tid('group-by').press('Enter');
await waitSettled(s1);
nm = await names();
assert.ok(nm.includes('1:version=v1') && nm.includes('1:version=v2'), nm.join(' '));
assert.ok(nm.includes('2:main'), 'the stacks follow under each version');
assert.match(await page.evaluate(() => location.search), /sum=job.*gb=version|gb=version.*sum=job/);
await shot('sum-and-group-by');

assert.deepEqual(errors, [], 'no errors in the page');
await browser.close();
console.log('all analysis steps passed');
