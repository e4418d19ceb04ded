// The whole view state, and its round trip through the URL's query string so
// that a copied link reopens the same view. Pure (unit-tested under Node).

export type Mode = 'single' | 'merge';
export type View = 'icicle' | 'table' | 'both';
export type Page = 'profiles' | 'targets';

/** A time range: a preset relative to now ("1h") or absolute [from, to] ms. */
export interface Range {
	preset?: string;
	from?: number;
	to?: number;
}

/** One side's selection: query, range, and which profile(s) of it to show. */
export interface Selection {
	type: string; // profile type key, e.g. parca_agent:samples:count:cpu:nanoseconds:delta
	matchers: string; // text between the braces: comm="x",node=~"a.*"
	range: Range;
	mode: Mode;
	time?: number; // single: the profile's timestamp
	start?: number; // merge: sub-range (defaults to the whole range)
	end?: number;
	series?: string; // single: the clicked series' matchers (pins one series)
}

export interface ViewState {
	page: Page;
	view: View;
	compare: boolean;
	a: Selection;
	b: Selection;
	focus: string[]; // icicle zoom: function names from the root's child down
	search: string;
	hide: string[]; // binaries hidden from the icicle graph
	sort: string; // table column
	desc: boolean;
	filter: string; // table text filter
	frames: FrameFilters; // pprof's frame filters, applied by the server
	sandwich: string; // a function's callers and callees ('' = off)
	norm: '' | 'absolute' | 'total' | 'duration'; // diff: how A is scaled ('' = the server's default)
	sumBy: string; // metrics graphs: labels to sum series by, comma-separated ('' = each series)
	groupBy: string; // flame graph: a label whose values become the first frame level
}

/** Lines a metrics graph draws at most; the rest are summed into one "other" line. */
export const GRAPH_SERIES_LIMIT = 20;

/** pprof's frame filters (PCRE2 patterns the server matches against function names). */
export interface FrameFilters {
	focus: string;
	ignore: string;
	hide: string;
	prune: string;
}

export const FRAME_FILTERS: { key: keyof FrameFilters; param: string; url: string; label: string; title: string }[] = [
	{ key: 'focus', param: 'focus', url: 'ff', label: 'Focus', title: 'keep only stacks through a function matching this regular expression' },
	{ key: 'ignore', param: 'ignore', url: 'fi', label: 'Ignore', title: 'drop stacks through a function matching this regular expression' },
	{ key: 'hide', param: 'hide', url: 'fh', label: 'Hide', title: 'take functions matching this regular expression out of the stacks' },
	{ key: 'prune', param: 'prune_from', url: 'fp', label: 'Prune from', title: 'drop what a function matching this regular expression calls' },
];

export function noFrameFilters(): FrameFilters {
	return { focus: '', ignore: '', hide: '', prune: '' };
}

export const PRESETS: { key: string; label: string; ms: number }[] = [
	{ key: '5m', label: 'Last 5 minutes', ms: 5 * 60e3 },
	{ key: '15m', label: 'Last 15 minutes', ms: 15 * 60e3 },
	{ key: '1h', label: 'Last 1 hour', ms: 3600e3 },
	{ key: '6h', label: 'Last 6 hours', ms: 6 * 3600e3 },
	{ key: '24h', label: 'Last 24 hours', ms: 24 * 3600e3 },
	{ key: '7d', label: 'Last 7 days', ms: 7 * 24 * 3600e3 },
];

export const DEFAULT_PRESET = '1h';

export function emptySelection(): Selection {
	return { type: '', matchers: '', range: { preset: DEFAULT_PRESET }, mode: 'merge' };
}

export function defaultState(): ViewState {
	return {
		page: 'profiles',
		view: 'icicle',
		compare: false,
		a: emptySelection(),
		b: emptySelection(),
		focus: [],
		search: '',
		hide: [],
		sort: 'flat',
		desc: true,
		filter: '',
		frames: noFrameFilters(),
		sandwich: '',
		norm: '',
		sumBy: '',
		groupBy: '',
	};
}

/** Absolute [from, to] of a range at time `now`. */
export function resolveRange(r: Range, now: number): [number, number] {
	if (r.from !== undefined && r.to !== undefined) return [r.from, r.to];
	const p = PRESETS.find((x) => x.key === r.preset) ?? PRESETS.find((x) => x.key === DEFAULT_PRESET)!;
	return [now - p.ms, now];
}

/** The query language expression: TYPE{matchers}. */
export function queryOf(sel: Pick<Selection, 'type' | 'matchers'>): string {
	return sel.type + '{' + sel.matchers.trim() + '}';
}

/** The query that selects the profile(s) shown: a clicked series is pinned. */
export function profileQueryOf(sel: Selection): string {
	if (sel.mode === 'single' && sel.series !== undefined) return sel.type + '{' + sel.series + '}';
	return queryOf(sel);
}

function rangeStr(r: Range): string {
	if (r.from !== undefined && r.to !== undefined) return r.from + '-' + r.to;
	return r.preset ?? DEFAULT_PRESET;
}

function parseRange(s: string | null): Range {
	if (!s) return { preset: DEFAULT_PRESET };
	const m = /^(\d+)-(\d+)$/.exec(s);
	if (m) return { from: Number(m[1]), to: Number(m[2]) };
	if (PRESETS.some((p) => p.key === s)) return { preset: s };
	return { preset: DEFAULT_PRESET };
}

function num(s: string | null): number | undefined {
	if (s === null || s === '') return undefined;
	const n = Number(s);
	return Number.isFinite(n) ? n : undefined;
}

function putSel(p: URLSearchParams, k: string, s: Selection): void {
	if (s.type) p.set(k + '.type', s.type);
	if (s.matchers) p.set(k + '.q', s.matchers);
	p.set(k + '.range', rangeStr(s.range));
	p.set(k + '.mode', s.mode);
	if (s.time !== undefined) p.set(k + '.time', String(s.time));
	if (s.start !== undefined) p.set(k + '.start', String(s.start));
	if (s.end !== undefined) p.set(k + '.end', String(s.end));
	if (s.series !== undefined) p.set(k + '.series', s.series);
}

function getSel(p: URLSearchParams, k: string): Selection {
	const mode = p.get(k + '.mode') === 'single' ? 'single' : 'merge';
	const s: Selection = {
		type: p.get(k + '.type') ?? '',
		matchers: p.get(k + '.q') ?? '',
		range: parseRange(p.get(k + '.range')),
		mode,
	};
	const t = num(p.get(k + '.time'));
	const st = num(p.get(k + '.start'));
	const en = num(p.get(k + '.end'));
	if (t !== undefined) s.time = t;
	if (st !== undefined) s.start = st;
	if (en !== undefined) s.end = en;
	const series = p.get(k + '.series');
	if (series !== null) s.series = series;
	return s;
}

/** ViewState → query string (without '?'); defaults are left out. */
export function encodeState(st: ViewState): string {
	const p = new URLSearchParams();
	if (st.page !== 'profiles') p.set('page', st.page);
	if (st.view !== 'icicle') p.set('view', st.view);
	putSel(p, 'a', st.a);
	if (st.compare) {
		p.set('compare', '1');
		putSel(p, 'b', st.b);
	}
	if (st.focus.length) p.set('focus', JSON.stringify(st.focus));
	if (st.search) p.set('search', st.search);
	if (st.hide.length) p.set('hide', st.hide.join(','));
	if (st.sort !== 'flat' || !st.desc) p.set('sort', (st.desc ? '-' : '') + st.sort);
	if (st.filter) p.set('filter', st.filter);
	for (const f of FRAME_FILTERS) if (st.frames[f.key]) p.set(f.url, st.frames[f.key]);
	if (st.sandwich) p.set('sw', st.sandwich);
	if (st.compare && st.norm) p.set('norm', st.norm);
	if (st.sumBy) p.set('sum', st.sumBy);
	if (st.groupBy) p.set('gb', st.groupBy);
	return p.toString();
}

const SORTS = ['name', 'flat', 'flat_pct', 'cum', 'cum_pct', 'diff_flat', 'diff_cum'];

export function decodeState(qs: string): ViewState {
	const p = new URLSearchParams(qs.startsWith('?') ? qs.slice(1) : qs);
	const st = defaultState();
	if (p.get('page') === 'targets') st.page = 'targets';
	const v = p.get('view');
	if (v === 'table' || v === 'both') st.view = v;
	st.a = getSel(p, 'a');
	st.compare = p.get('compare') === '1';
	if (st.compare) st.b = getSel(p, 'b');
	const f = p.get('focus');
	if (f) {
		try {
			const arr = JSON.parse(f);
			if (Array.isArray(arr)) st.focus = arr.map(String);
		} catch {
			/* a hand-edited link: ignore the zoom, keep the rest */
		}
	}
	st.search = p.get('search') ?? '';
	const h = p.get('hide');
	if (h) st.hide = h.split(',').filter(Boolean);
	const so = p.get('sort');
	if (so) {
		const desc = so.startsWith('-');
		const col = desc ? so.slice(1) : so;
		if (SORTS.includes(col)) {
			st.sort = col;
			st.desc = desc;
		}
	}
	st.filter = p.get('filter') ?? '';
	for (const f of FRAME_FILTERS) st.frames[f.key] = p.get(f.url) ?? '';
	st.sandwich = p.get('sw') ?? '';
	st.sumBy = p.get('sum') ?? '';
	st.groupBy = p.get('gb') ?? '';
	const norm = p.get('norm');
	if (st.compare && (norm === 'absolute' || norm === 'total' || norm === 'duration')) st.norm = norm;
	return st;
}

/** Query-string parameters for /api/v1/query selecting one side's profile(s). */
export function selectionParams(sel: Selection, now: number, prefix = ''): Record<string, string> {
	const out: Record<string, string> = {};
	const q = profileQueryOf(sel);
	const [from, to] = resolveRange(sel.range, now);
	if (sel.mode === 'single' && sel.time !== undefined) {
		out[prefix + 'mode'] = 'single';
		out[prefix + 'time'] = String(sel.time);
	} else {
		out[prefix + 'mode'] = 'merge';
		out[prefix + 'start'] = String(sel.start ?? from);
		out[prefix + 'end'] = String(sel.end ?? to);
	}
	out[prefix ? prefix + 'query' : 'query'] = q;
	return out;
}

/** Everything /api/v1/query needs for the current view (report added by the caller). */
export function profileRequest(st: ViewState, now: number): Record<string, string> {
	let p: Record<string, string>;
	if (st.compare) {
		p = { mode: 'diff', ...selectionParams(st.a, now, 'a_'), ...selectionParams(st.b, now, 'b_') };
		if (st.norm) p.diff_normalize = st.norm;
	} else {
		p = selectionParams(st.a, now);
	}
	if (st.hide.length) p.hide_binaries = st.hide.join(',');
	for (const f of FRAME_FILTERS) if (st.frames[f.key]) p[f.param] = st.frames[f.key];
	if (st.groupBy) p.group_by = st.groupBy;
	if (st.sandwich) {
		p.sandwich = st.sandwich;
		p.sandwich_side = 'callees';
	}
	return p;
}

/** Parameters of the deploy-regression report for a compare view (null when not comparing). */
export function regressionRequest(st: ViewState, now: number): Record<string, string> | null {
	if (!st.compare) return null;
	const p: Record<string, string> = { mode: 'diff', ...selectionParams(st.a, now, 'a_'), ...selectionParams(st.b, now, 'b_') };
	if (p.a_mode !== 'merge' || p.b_mode !== 'merge') return null; // single profiles have no windows to test
	if (st.hide.length) p.hide_binaries = st.hide.join(',');
	for (const f of FRAME_FILTERS) if (st.frames[f.key]) p[f.param] = st.frames[f.key];
	return p;
}

/** A copy whose relative ranges are pinned to absolute times (for shared links). */
export function freezeRanges(st: ViewState, now: number): ViewState {
	const pin = (s: Selection): Selection => {
		const [from, to] = resolveRange(s.range, now);
		return { ...s, range: { from, to } };
	};
	return { ...st, a: pin(st.a), b: st.compare ? pin(st.b) : st.b };
}
