// Kiln web UI: wires the query bars, metrics graphs, icicle graph, table and
// targets page to the view state, which lives in the URL (see state.ts).

import './style.css';
import { FrameFilterBar, RegressionPanel } from './analysis';
import { downloadWithToken, savedToken } from './auth';
import { api, ApiError, apiStats, type ProfileType, type Series, type TopResult } from './api';
import { DIFF_STEPS, diffBucketColor, binaryColor, packageOf } from './colors';
import { h, Loading } from './dom';
import { ancestorsOf, binaryShares, packageShares, decodeFlame, nodeOfPath, widestNodeNamed, type Flame } from './flame';
import { MetricsGraph, seriesMatchers } from './graph';
import { Icicle, singleBinary } from './icicle';
import { QueryBar } from './querybar';
import { GRAPH_SERIES_LIMIT, decodeState, encodeState, freezeRanges, profileRequest, queryOf, regressionRequest, resolveRange, type Selection, type ViewState } from './state';
import { Table } from './table';
import { renderTargets } from './targets';
import { cpuYMode, formatPercent, formatValue, type YMode } from './units';

type SideKey = 'a' | 'b';

let state: ViewState = decodeState(location.search);
let types: ProfileType[] = [];
let now = Date.now(); // the instant relative ranges resolve against (set by each Search)
let flame: Flame | null = null;
let top: TopResult | null = null;
let profileCtl: AbortController | null = null;
let topCtl: AbortController | null = null;
let profileSeq = 0;
let searchT0 = 0;

const perfLog = () => (window.__kilnPerf ??= { paints: [], frames: [] }) as NonNullable<typeof window.__kilnPerf> & {
	searches?: { nodes: number; ms: number; bytes: number; fetchMs: number; jsonMs: number; parseMs: number; drawMs: number }[];
};

// ---- theme ---------------------------------------------------------------
function isDark(): boolean {
	return document.documentElement.dataset.theme === 'dark';
}
function setTheme(t: 'light' | 'dark'): void {
	document.documentElement.dataset.theme = t;
	try {
		localStorage.setItem('kiln-theme', t);
	} catch {
		/* private mode */
	}
	icicle.setTheme(t === 'dark');
	renderLegend();
	for (const k of ['a', 'b'] as SideKey[]) sides[k].redrawGraph();
	themeBtn.textContent = t === 'dark' ? 'Light theme' : 'Dark theme';
}
{
	let t: string | null = null;
	try {
		t = localStorage.getItem('kiln-theme');
	} catch {
		/* ignore */
	}
	if (t !== 'light' && t !== 'dark') t = matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
	document.documentElement.dataset.theme = t;
}

// ---- URL -----------------------------------------------------------------
function commit(push = false): void {
	const qs = encodeState(state);
	const url = location.pathname + (qs ? '?' + qs : '');
	if (url === location.pathname + location.search) return;
	if (push) history.pushState(null, '', url);
	else history.replaceState(null, '', url);
}

// ---- one side: query bar + metrics graph ------------------------------------
class Side {
	readonly key: SideKey;
	readonly el: HTMLElement;
	readonly bar: QueryBar;
	readonly graph: MetricsGraph;
	private loading = new Loading('Loading series…');
	private empty: HTMLElement;
	private info: HTMLElement;
	private ctl: AbortController | null = null;
	private last: { series: Series[]; unit: string; ymode: YMode } | null = null;
	private ymodeSel: HTMLSelectElement;
	readonly sumIn: HTMLInputElement;

	constructor(key: SideKey) {
		this.key = key;
		this.bar = new QueryBar(key, () => search(key));
		this.graph = new MetricsGraph({
			onPoint: (t, s) => selectPoint(key, t, s),
			onRange: (a, b) => showMerge(key, a, b),
		});
		this.empty = h('div.empty-state', { testid: `graph-empty-${key}`, hidden: true });
		this.info = h('div.selection-info', { testid: `selection-${key}` });
		this.ymodeSel = h('select.ymode', { testid: `ymode-${key}`, title: 'Y axis', hidden: true }, h('option', { value: 'cores' }, 'CPU cores'), h('option', { value: 'percent' }, '% of one core'), h('option', { value: 'raw' }, 'CPU time'));
		this.ymodeSel.addEventListener('change', () => this.redrawGraph());
		const merge = h('button', { testid: `merge-${key}`, title: 'Merge every profile of the query range into one', onclick: () => showMerge(key) }, 'Merge range');
		this.sumIn = h('input.sum-by', { testid: `sum-by-${key}`, type: 'text', placeholder: 'sum by label,…', title: `Sum the series by these labels (both graphs); at most ${GRAPH_SERIES_LIMIT} lines, the rest summed as "other"`, spellcheck: false });
		this.sumIn.addEventListener('change', () => setSumBy(this.sumIn.value));
		this.el = h(
			'div.side',
			{ testid: `side-${key}` },
			h('div.side-title', {}, key === 'a' ? 'A · base' : 'B · comparison'),
			this.bar.el,
			this.loading.el,
			this.empty,
			this.graph.el,
			h('div.side-foot', {}, this.info, h('span.grow'), this.sumIn, this.ymodeSel, merge),
		);
	}

	sel(): Selection {
		return state[this.key];
	}

	redrawGraph(): void {
		if (!this.last) return;
		const ym = this.ymodeSel.hidden ? 'raw' : (this.ymodeSel.value as YMode);
		this.graph.setData(this.last.series, this.last.unit, ym, resolveRange(this.sel().range, now));
		const s = this.sel();
		this.graph.setSelected(s.mode === 'single' && s.time !== undefined ? s.time : null);
	}

	updateInfo(): void {
		const s = this.sel();
		const [from, to] = resolveRange(s.range, now);
		const t = (ms: number) => new Date(ms).toLocaleString();
		if (!s.type) this.info.textContent = '';
		else if (s.mode === 'single' && s.time !== undefined) this.info.textContent = `Single profile at ${t(s.time)}` + (s.series ? ` · {${s.series}}` : '');
		else if (s.start !== undefined && s.end !== undefined) this.info.textContent = `Merged ${t(s.start)} – ${t(s.end)}`;
		else this.info.textContent = `Merged whole range ${t(from)} – ${t(to)}`;
	}

	async loadGraph(): Promise<void> {
		const s = this.sel();
		this.updateInfo();
		if (!s.type) {
			this.graph.el.hidden = true;
			this.empty.hidden = false;
			this.empty.textContent = types.length ? 'Select a profile type, optionally add label matchers, and press Search.' : 'No profiles stored yet. Start kiln-agent on a host (sudo kiln-agent --remote-store-address=' + location.host + ' --remote-store-insecure), or push a pprof file (kilnctl push --address=' + location.host + ' --labels=job=NAME FILE.pprof), then reload this page.';
			return;
		}
		this.ctl?.abort();
		const ctl = (this.ctl = new AbortController());
		const [from, to] = resolveRange(s.range, now);
		this.loading.start('Loading series…');
		this.bar.clearError();
		try {
			const r = await api.queryRange(queryOf(s), from, to, ctl.signal, state.sumBy, GRAPH_SERIES_LIMIT);
			if (ctl.signal.aborted) return;
			const pt = types.find((t) => t.key === s.type);
			const ym = cpuYMode(r.unit, pt?.period_type);
			this.ymodeSel.hidden = ym === 'raw';
			this.last = { series: r.series, unit: r.unit, ymode: ym };
			if (!r.series.length) {
				this.graph.el.hidden = true;
				this.empty.hidden = false;
				this.empty.textContent = 'No data for this query in range — widen the range or check the labels.';
			} else {
				this.empty.hidden = true;
				this.graph.el.hidden = false;
				this.redrawGraph();
			}
		} catch (e) {
			if ((e as Error).name === 'AbortError') return;
			this.graph.el.hidden = true;
			this.empty.hidden = true;
			this.bar.showError(e as Error);
		} finally {
			if (this.ctl === ctl) this.loading.stop();
		}
	}
}

// ---- result area: toolbar, legend, icicle, table ----------------------------
const icicle = new Icicle({
	onFocus: (path) => {
		state.focus = path;
		commit();
		renderBreadcrumb();
	},
	onPan: () => (resetBtn.disabled = false),
	onContext: (name) => setSandwich(name),
});
// The sandwich view's other half: the function's callers, above its callees.
const callersIcicle = new Icicle({ onFocus: () => {}, onContext: (name) => setSandwich(name) }, 'callers-icicle');
const frameFilters = new FrameFilterBar((f) => {
	state.frames = f;
	state.focus = [];
	commit(true);
	loadProfile();
});
const regression = new RegressionPanel((name) => focusFunction(name));
let regressionCtl: AbortController | null = null;
const sandwichTitle = h('span.sandwich-title', { testid: 'sandwich-title' });
const sandwichBar = h(
	'div.sandwich-bar',
	{ testid: 'sandwich-bar', hidden: true },
	sandwichTitle,
	h('button.ghost', { testid: 'sandwich-close', title: 'Back to the whole flame graph', onclick: () => setSandwich('') }, 'Close sandwich'),
);
const callersWrap = h('div.icicle-wrap.callers', { testid: 'sandwich-callers', hidden: true }, callersIcicle.el);
const table = new Table({
	onSort: (col, desc) => {
		state.sort = col;
		state.desc = desc;
		commit();
	},
	onFilter: (t) => {
		state.filter = t;
		commit();
	},
	onRow: (name) => focusFunction(name),
});

const sides: Record<SideKey, Side> = { a: new Side('a'), b: new Side('b') };
const profileLoading = new Loading('Loading profile…');
const resultEmpty = h('div.empty-state', { testid: 'result-empty' });
const resultError = h('div.error-box', { testid: 'result-error', hidden: true });
const breadcrumb = h('nav.breadcrumb', { testid: 'breadcrumb' });
const legendEl = h('div.legend', { testid: 'legend' });
const hiddenEl = h('div.hidden-binaries', { testid: 'hidden-binaries' });
const searchIn = h('input.fn-search', { testid: 'fn-search', type: 'search', placeholder: 'Search functions  ( / )', spellcheck: false });
const searchShare = h('span.search-share', { testid: 'search-share' });
const summaryEl = h('span.summary', { testid: 'summary' });
const dlPprof = h('a.button', { testid: 'download-pprof', download: 'profile.pb.gz', title: 'Download the current profile as gzipped pprof' }, 'pprof ↓');
const dlFolded = h('a.button', { testid: 'download-folded', download: 'profile.folded.txt', title: 'Download folded stacks' }, 'folded ↓');
// A plain link cannot carry the token: with one, download through fetch.
for (const a of [dlPprof, dlFolded])
	a.addEventListener('click', (e) => {
		if (!savedToken() || !a.href) return;
		e.preventDefault();
		downloadWithToken(a.href, a.download).catch((err) => a.setAttribute('title', 'download failed: ' + (err as Error).message));
	});
const shareOut = h('input.share-link', { testid: 'share-link', readOnly: true, hidden: true });
const copyBtn = h('button', { testid: 'copy-link', title: 'Copy a link that reopens this view', onclick: () => copyLink() }, 'Copy link');
const viewBtns = (['icicle', 'table', 'both'] as const).map((v) =>
	h('button.seg', { testid: `view-${v}`, onclick: () => setView(v) }, v === 'icicle' ? 'Icicle' : v === 'table' ? 'Table' : 'Both'),
);
// Compare: how A is scaled against B before the difference is taken.
const normSel = h(
	'select.norm',
	{ testid: 'diff-normalize', title: 'How A is scaled before B − A is taken' },
	h('option', { value: '' }, 'Diff: automatic'),
	h('option', { value: 'absolute' }, 'Diff: absolute'),
	h('option', { value: 'total' }, 'Diff: normalized by total'),
	h('option', { value: 'duration' }, 'Diff: normalized by duration'),
);
normSel.addEventListener('change', () => {
	state.norm = normSel.value as ViewState['norm'];
	commit(true);
	loadProfile();
});
const groupIn = h('input.group-by', { testid: 'group-by', type: 'text', placeholder: 'group by label', title: "One first-level frame per value of this label (e.g. comm, pid)", spellcheck: false });
groupIn.addEventListener('change', () => setGroupBy(groupIn.value));
const resetBtn = h('button', { testid: 'reset-zoom', title: 'Reset zoom (Esc)', onclick: () => icicle.reset() }, 'Reset zoom');
const icicleWrap = h('div.icicle-wrap', { testid: 'icicle-wrap' }, sandwichBar, callersWrap, icicle.el);
const tableWrap = h('div.table-wrap', {}, table.el);
const content = h('div.content', { testid: 'content' }, icicleWrap, tableWrap);

searchIn.value = state.search;
searchIn.addEventListener('input', () => {
	state.search = searchIn.value;
	commit();
	applySearch();
});
searchIn.addEventListener('keydown', (e) => {
	if (e.key === 'Escape') {
		searchIn.value = '';
		state.search = '';
		commit();
		applySearch();
		searchIn.blur();
	}
});

const result = h(
	'div.result',
	{ testid: 'result' },
	h('div.toolbar', {}, h('div.segmented', {}, ...viewBtns), searchIn, searchShare, h('span.grow'), summaryEl, dlPprof, dlFolded, copyBtn, shareOut),
	h('div.toolbar2', {}, breadcrumb, groupIn, normSel, resetBtn),
	frameFilters.el,
	legendEl,
	hiddenEl,
	resultError,
	profileLoading.el,
	resultEmpty,
	content,
	regression.el,
);

// ---- header, pages -------------------------------------------------------
const themeBtn = h('button.ghost', { testid: 'theme-toggle', onclick: () => setTheme(isDark() ? 'light' : 'dark') }, isDark() ? 'Light theme' : 'Dark theme');
const navProfiles = h('button.nav', { testid: 'nav-profiles', onclick: () => setPage('profiles') }, 'Profiles');
const navTargets = h('button.nav', { testid: 'nav-targets', onclick: () => setPage('targets') }, 'Targets');
const compareBtn = h('button', { testid: 'compare-toggle', onclick: () => toggleCompare() }, 'Compare');
const sidesEl = h('div.sides', {}, sides.a.el, sides.b.el);
const profilesPage = h('main.page', { testid: 'page-profiles' }, sidesEl, result);
const targetsPage = h('main.page.targets-page', { testid: 'page-targets' });
document.getElementById('app')!.replaceChildren(
	h('header.top', {}, h('span.logo', {}, 'Kiln'), navProfiles, navTargets, h('span.grow'), compareBtn, themeBtn),
	profilesPage,
	targetsPage,
);

function setPage(p: 'profiles' | 'targets'): void {
	state.page = p;
	commit(true);
	renderPage();
}

function renderPage(): void {
	profilesPage.hidden = state.page !== 'profiles';
	targetsPage.hidden = state.page !== 'targets';
	navProfiles.classList.toggle('active', state.page === 'profiles');
	navTargets.classList.toggle('active', state.page === 'targets');
	compareBtn.hidden = state.page !== 'profiles';
	clearInterval(targetsTimer);
	if (state.page === 'targets') {
		const hooks = { onRefresh: () => renderTargets(targetsPage, true, hooks), onOpen: openTarget };
		renderTargets(targetsPage, false, hooks);
		// Health and last scrape change with every scrape: keep them current while the page is open.
		targetsTimer = window.setInterval(() => document.visibilityState === 'visible' && hooks.onRefresh(), 5000);
	}
}
let targetsTimer = 0;

/** Targets page → Profiles: the target's first profile type of that name, its labels as matchers, searched. */
async function openTarget(name: string, matchers: string): Promise<void> {
	const pick = () => types.find((x) => x.name === name && x.sample_unit !== 'count') ?? types.find((x) => x.name === name);
	if (!pick()) await loadTypes(); // the first scrape may have come after this page loaded
	const t = pick();
	state.page = 'profiles';
	state.compare = false;
	state.a = { type: t?.key ?? '', matchers, range: { preset: '1h' }, mode: 'merge' };
	state.hide = [];
	state.focus = [];
	sides.a.bar.load(state.a);
	commit(true);
	renderPage();
	renderLayout();
	if (t) search('a');
	else sides.a.bar.showError(new ApiError(`no profiles named "${name}" stored yet — wait for the first scrape, then reload`, 404));
}

function renderLayout(): void {
	sidesEl.classList.toggle('compare', state.compare);
	sides.b.el.hidden = !state.compare;
	sides.a.el.querySelector('.side-title')!.toggleAttribute('hidden', !state.compare);
	compareBtn.classList.toggle('active', state.compare);
	compareBtn.textContent = state.compare ? 'Stop comparing' : 'Compare';
	normSel.hidden = !state.compare;
	normSel.value = state.norm;
	for (const b of viewBtns) b.classList.toggle('active', b.dataset.testid === `view-${state.view}`);
	content.className = 'content view-' + state.view;
	icicleWrap.hidden = state.view === 'table';
	tableWrap.hidden = state.view === 'icicle';
}

function setView(v: ViewState['view']): void {
	state.view = v;
	commit();
	renderLayout();
	if (v !== 'icicle' && !top && flame) loadTop();
}

function toggleCompare(): void {
	state.compare = !state.compare;
	if (state.compare && !state.b.type) {
		state.b = { ...state.a, range: { ...state.a.range } };
		sides.b.bar.load(state.b);
	}
	state.focus = [];
	commit(true);
	renderLayout();
	if (state.compare) sides.b.loadGraph();
	loadProfile();
}

// ---- actions ---------------------------------------------------------------
function search(key: SideKey): void {
	const bar = sides[key].bar;
	const s = state[key];
	s.type = bar.type();
	try {
		if (s.type) localStorage.setItem('kiln-last-type', s.type);
	} catch {
		/* private mode */
	}
	s.matchers = bar.matchers();
	s.range = bar.range();
	s.mode = 'merge';
	delete s.time;
	delete s.start;
	delete s.end;
	delete s.series;
	state.focus = [];
	now = Date.now();
	searchT0 = performance.now();
	commit(true);
	sides[key].loadGraph();
	loadProfile();
}

function selectPoint(key: SideKey, time: number, s: Series): void {
	// The summed rest has no matchers of its own: its whole range is the merge.
	if ('__other__' in s.labels) return showMerge(key);
	const sel = state[key];
	sel.mode = 'single';
	sel.time = time;
	sel.series = seriesMatchers(s);
	delete sel.start;
	delete sel.end;
	state.focus = [];
	commit(true);
	sides[key].graph.setSelected(time);
	sides[key].updateInfo();
	searchT0 = performance.now();
	loadProfile();
}

/* Both the brushed range and "Merge range" show one merged profile; a range
 * left undefined merges the whole query range. */
function showMerge(key: SideKey, start?: number, end?: number): void {
	const sel = state[key];
	sel.mode = 'merge';
	delete sel.time;
	delete sel.series;
	if (start === undefined || end === undefined) {
		delete sel.start;
		delete sel.end;
	} else {
		sel.start = start;
		sel.end = end;
	}
	state.focus = [];
	commit(true);
	sides[key].graph.setSelected(null);
	sides[key].updateInfo();
	searchT0 = performance.now();
	loadProfile();
}

function focusFunction(name: string): void {
	if (!flame) return;
	const i = widestNodeNamed(flame, name);
	if (state.view === 'table') setView('both');
	searchIn.value = name;
	state.search = name;
	applySearch();
	if (i > 0) icicle.zoomTo(i);
}

/** Sums both metrics graphs' series by these labels ('' = one line per series). */
function setSumBy(text: string): void {
	state.sumBy = text
		.split(',')
		.map((x) => x.trim())
		.filter(Boolean)
		.join(',');
	for (const k of ['a', 'b'] as SideKey[]) sides[k].sumIn.value = state.sumBy;
	commit(true);
	sides.a.loadGraph();
	if (state.compare) sides.b.loadGraph();
}

/** Groups the flame graph by a label: its values become the first frame level. */
function setGroupBy(label: string): void {
	state.groupBy = label.trim();
	state.focus = [];
	commit(true);
	loadProfile();
}

/** Shows a function's callers above its callees ('' = the whole graph again). */
function setSandwich(name: string): void {
	state.sandwich = name;
	state.focus = [];
	commit(true);
	loadProfile();
}

function applySearch(): void {
	if (!flame) {
		searchShare.textContent = '';
		return;
	}
	const v = icicle.setSearch(state.search);
	const total = flame.cum[0] || flame.total;
	searchShare.textContent = state.search ? `${formatPercent(v, total)} of total (${formatValue(v, flame.unit)}) matches` : '';
}

async function copyLink(): Promise<void> {
	const qs = encodeState(freezeRanges(state, now));
	const url = location.origin + location.pathname + '?' + qs;
	shareOut.value = url;
	shareOut.hidden = false;
	let ok = false;
	try {
		await navigator.clipboard.writeText(url);
		ok = true;
	} catch {
		shareOut.select();
		ok = document.execCommand('copy');
	}
	copyBtn.textContent = ok ? 'Copied' : 'Copy the link below';
	setTimeout(() => (copyBtn.textContent = 'Copy link'), 2000);
}

// ---- profile loading ---------------------------------------------------------
function ready(): boolean {
	return !!state.a.type && (!state.compare || !!state.b.type);
}

async function loadProfile(): Promise<void> {
	sides.a.updateInfo();
	sides.b.updateInfo();
	top = null;
	resultError.hidden = true;
	if (!ready()) {
		flame = null;
		regression.hide();
		sandwichBar.hidden = callersWrap.hidden = true;
		content.hidden = true;
		resultEmpty.hidden = false;
		resultEmpty.textContent = state.compare
			? 'Compare: choose a query for both A (base) and B (comparison), then Search on each side. Click a point or drag a range on each graph to pick what to compare.'
			: types.length
				? 'Pick a profile type and press Search: the whole range is merged into one profile. Click a point on the graph for a single profile, or drag across it to merge a sub-range.'
				: 'No profiles stored yet. Start kiln-agent (sudo kiln-agent --remote-store-address=' + location.host + ' --remote-store-insecure), or push a pprof file (kilnctl push --address=' + location.host + ' --labels=job=NAME FILE.pprof), then reload.';
		setDownloads(null);
		return;
	}
	profileCtl?.abort();
	topCtl?.abort();
	const ctl = (profileCtl = new AbortController());
	const seq = ++profileSeq;
	const params = profileRequest(state, now);
	const t0 = searchT0 || performance.now();
	loadRegression();
	loadCallers(ctl);
	profileLoading.start(state.compare ? 'Computing the diff…' : 'Loading profile…');
	try {
		const j = await api.flame(params, ctl.signal);
		if (seq !== profileSeq) return;
		const { lastBytes: bytes, fetchMs, jsonMs } = apiStats;
		const tp = performance.now();
		const f = decodeFlame(j);
		const parseMs = performance.now() - tp;
		flame = f;
		setDownloads(params);
		if (f.n <= 1 || f.total === 0) {
			content.hidden = true;
			resultEmpty.hidden = false;
			resultEmpty.textContent = state.compare
				? 'Both selections are empty — pick points or ranges with data on each graph.'
				: 'No samples in the selected profile(s) — widen the time range, pick another point on the graph, or check the label matchers.';
			legendEl.replaceChildren();
			summaryEl.textContent = '';
			return;
		}
		resultEmpty.hidden = true;
		content.hidden = false;
		const td = performance.now();
		const focus = state.focus.length ? nodeOfPath(f, state.focus) : 0;
		icicle.setTheme(isDark());
		icicle.setData(f, Math.max(0, focus));
		applySearch();
		const drawMs = performance.now() - td;
		const scale = f.diff && f.baseScale !== 1 ? ` · A ×${f.baseScale.toFixed(2)}` : '';
		summaryEl.textContent = `${state.compare ? 'diff · ' : ''}total ${formatValue(f.total, f.unit)} · ${f.n.toLocaleString()} nodes${scale}`;
		renderLegend();
		renderHidden();
		renderBreadcrumb();
		if (!state.focus.length || focus < 0) state.focus = focus > 0 ? state.focus : [];
		commit();
		requestAnimationFrame(() => {
			const log = perfLog();
			(log.searches ??= []).push({ nodes: f.n, ms: performance.now() - t0, bytes, fetchMs, jsonMs, parseMs, drawMs });
			document.body.dataset.painted = String(seq);
		});
		if (state.view !== 'icicle') loadTop();
	} catch (e) {
		if ((e as Error).name === 'AbortError') return;
		flame = null;
		content.hidden = true;
		resultEmpty.hidden = true;
		// Nothing of the previous answer may stay on screen beside the error.
		legendEl.replaceChildren();
		summaryEl.textContent = '';
		breadcrumb.replaceChildren();
		setDownloads(null);
		regressionCtl?.abort();
		regression.hide();
		resultError.hidden = false;
		resultError.textContent = 'Query failed: ' + (e as Error).message.split('\n')[0];
		if (e instanceof ApiError && e.position !== undefined) sides.a.bar.showError(e);
	} finally {
		if (seq === profileSeq) {
			profileLoading.stop();
			document.body.dataset.settled = String(seq); // answered: painted, empty or failed (tests wait on it)
		}
	}
}

/** The sandwich's callers half (the main icicle shows the callees). */
async function loadCallers(ctl: AbortController): Promise<void> {
	sandwichBar.hidden = callersWrap.hidden = !state.sandwich;
	if (!state.sandwich) return;
	sandwichTitle.textContent = `Sandwich of ${state.sandwich}: its callers above (the function first, then who called it), what it calls below. Right-click another frame to move the sandwich.`;
	try {
		const j = await api.flame({ ...profileRequest(state, now), sandwich_side: 'callers' }, ctl.signal);
		if (ctl.signal.aborted) return;
		const f = decodeFlame(j);
		callersIcicle.setTheme(isDark());
		callersIcicle.setData(f, 0);
	} catch (e) {
		if ((e as Error).name === 'AbortError') return;
		sandwichTitle.textContent = 'Callers query failed: ' + (e as Error).message.split('\n')[0];
	}
}

/** The compare view's ranked table: which functions got slower, with confidence. */
async function loadRegression(): Promise<void> {
	regressionCtl?.abort();
	const params = regressionRequest(state, now);
	if (!params) {
		regression.hide();
		return;
	}
	const ctl = (regressionCtl = new AbortController());
	regression.loading();
	try {
		const r = await api.regression(params, ctl.signal);
		if (!ctl.signal.aborted) regression.set(r);
	} catch (e) {
		if ((e as Error).name === 'AbortError') return;
		regression.error((e as Error).message.split('\n')[0]);
	}
}

async function loadTop(): Promise<void> {
	if (!ready()) return;
	topCtl?.abort();
	const ctl = (topCtl = new AbortController());
	try {
		const t = await api.top(profileRequest(state, now), ctl.signal);
		if (ctl.signal.aborted) return;
		top = t;
		table.set(t, state.compare, state.sort, state.desc, state.filter);
	} catch (e) {
		if ((e as Error).name === 'AbortError') return;
		resultError.hidden = false;
		resultError.textContent = 'Table query failed: ' + (e as Error).message;
	}
}

function setDownloads(params: Record<string, string> | null): void {
	for (const [a, r] of [
		[dlPprof, 'pprof'],
		[dlFolded, 'folded'],
	] as const) {
		if (params) {
			a.href = api.downloadUrl(params, r);
			a.classList.remove('disabled');
		} else {
			a.removeAttribute('href');
			a.classList.add('disabled');
		}
	}
}

function renderBreadcrumb(): void {
	const f = icicle.flame;
	if (!f) {
		breadcrumb.replaceChildren();
		return;
	}
	const path = ancestorsOf(f, icicle.focusNode);
	const items: (HTMLElement | string)[] = [];
	path.forEach((n, k) => {
		if (k) items.push(h('span.sep', {}, '›'));
		items.push(h('a.crumb', { href: '#', title: f.strings[f.name[n]], onclick: (e: Event) => (e.preventDefault(), icicle.zoomTo(n)) }, n === 0 ? 'root' : f.strings[f.name[n]]));
	});
	breadcrumb.replaceChildren(...items);
	resetBtn.disabled = icicle.focusNode === 0;
}

function renderLegend(): void {
	const f = flame;
	if (!f) {
		legendEl.replaceChildren();
		return;
	}
	const dark = isDark();
	if (f.diff) {
		const pct = (b: number) => (b === 0 ? 'unchanged (within ±2%)' : `${b > 0 ? '+' : '−'}${Math.round((Math.abs(b) / DIFF_STEPS) * 100)}% or ${b > 0 ? 'more' : 'less'}`);
		const sw = (b: number, label?: string) => h('span.diff-swatch', { style: `background:${diffBucketColor(b, dark)}`, title: label ?? pct(b) });
		legendEl.replaceChildren(
			h('span.legend-title', {}, 'Change B vs A:'),
			h('span.legend-item', { testid: 'diff-legend-better' }, 'better (less) −100%'),
			...[-DIFF_STEPS, -DIFF_STEPS / 2, -1].map((b) => sw(b)),
			sw(0, 'unchanged'),
			...[1, DIFF_STEPS / 2, DIFF_STEPS].map((b) => sw(b)),
			h('span.legend-item', { testid: 'diff-legend-worse' }, '+100% worse (more)'),
			h('span.legend-note', {}, '· width = B · intensity = relative change, full at ±100% · lavender = unchanged'),
		);
		return;
	}
	const shares = binaryShares(f).slice(0, 14);
	const total = f.cum[0] || 1;
	const pk: HTMLElement[] = [];
	if (singleBinary(f)) {
		pk.push(h('span.legend-title', {}, 'Colour by package:'));
		for (const s of packageShares(f, packageOf).slice(0, 10)) {
			pk.push(h('span.legend-item', { testid: 'legend-package' }, h('i', { style: `background:${binaryColor(s.key, dark)}` }), `${s.key} ${formatPercent(s.value, total)}`));
		}
		pk.push(h('span.legend-sep', {}, '|'));
	}
	legendEl.replaceChildren(
		...pk,
		h('span.legend-title', {}, 'Binaries (click to hide):'),
		...shares.map((s) =>
			h(
				'button.legend-item.binary',
				{ testid: 'legend-binary', title: `hide frames of ${s.binary}`, onclick: () => hideBinary(s.binary) },
				h('i', { style: `background:${binaryColor(s.binary === '(unknown)' ? '' : s.binary, dark)}` }),
				`${s.binary} ${formatPercent(s.value, total)}`,
			),
		),
	);
}

function renderHidden(): void {
	hiddenEl.replaceChildren(
		...(state.hide.length ? [h('span.legend-title', {}, 'Hidden binaries:')] : []),
		...state.hide.map((b) => h('button.chip', { testid: 'hidden-chip', title: 'show again', onclick: () => unhideBinary(b) }, b + ' ×')),
	);
}

function hideBinary(b: string): void {
	if (b === '(unknown)' || state.hide.includes(b)) return;
	state.hide.push(b);
	state.focus = [];
	commit();
	loadProfile();
}

function unhideBinary(b: string): void {
	state.hide = state.hide.filter((x) => x !== b);
	commit();
	loadProfile();
}

// ---- keyboard ----------------------------------------------------------------
document.addEventListener('keydown', (e) => {
	const t = e.target as HTMLElement;
	const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT');
	if (e.key === '/' && !typing) {
		e.preventDefault();
		searchIn.focus();
		searchIn.select();
	} else if (e.key === 'Escape' && !typing) {
		icicle.reset();
	}
});

window.addEventListener('popstate', () => {
	state = decodeState(location.search);
	start(false);
});

// ---- test and bench hooks ------------------------------------------------------
(window as unknown as { __kiln: unknown }).__kiln = {
	icicle,
	graph: (k: SideKey) => sides[k].graph,
	state: () => state,
	flame: () => flame,
	callers: () => callersIcicle.flame,
	widest: (name: string) => (flame ? widestNodeNamed(flame, name) : -1),
	top: () => top,
};

// ---- start ---------------------------------------------------------------------
async function loadTypes(): Promise<void> {
	try {
		const [from, to] = resolveRange({ preset: '7d' }, Date.now());
		types = (await api.profileTypes(from - 30 * 86400e3, to + 86400e3)).types;
	} catch (e) {
		sides.a.bar.showError(e as Error);
	}
	sides.a.bar.setTypes(types, state.a.type || preferredType());
	sides.b.bar.setTypes(types, state.b.type || preferredType());
}

/** The type to offer first: the last one searched, else the agent's CPU samples, else any CPU type. */
function preferredType(): string {
	let last = '';
	try {
		last = localStorage.getItem('kiln-last-type') ?? '';
	} catch {
		/* private mode */
	}
	const pick =
		types.find((t) => t.key === last) ??
		types.find((t) => t.key === 'parca_agent:samples:count:cpu:nanoseconds:delta') ??
		types.find((t) => t.period_type === 'cpu') ??
		types[0];
	return pick?.key ?? '';
}

async function start(fetchTypes = true): Promise<void> {
	renderPage();
	renderLayout();
	sides.a.bar.load(state.a);
	sides.b.bar.load(state.b);
	searchIn.value = state.search;
	frameFilters.load(state.frames);
	groupIn.value = state.groupBy;
	for (const k of ['a', 'b'] as SideKey[]) sides[k].sumIn.value = state.sumBy;
	if (fetchTypes) await loadTypes();
	else {
		sides.a.bar.setTypes(types, state.a.type);
		sides.b.bar.setTypes(types, state.b.type);
	}
	sides.a.loadGraph();
	if (state.compare) sides.b.loadGraph();
	loadProfile();
}

start();
