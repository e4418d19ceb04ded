// Unit tests of the UI's pure logic, run under Node by vitest
// (tests/integration/ui_logic.sh).
import { describe, expect, it } from 'vitest';
import { formatTicks, formatBytes, formatCount, formatNanos, formatPercent, formatValue, formatY, toCores, cpuYMode, formatAgo } from '../src/units';
import { decodeState, defaultState, encodeState, freezeRanges, profileRequest, regressionRequest, resolveRange, type ViewState } from '../src/state';
import { decodeFlame, visibleNodes, nodeAt, pathOf, nodeOfPath, searchMask, matchedValue, widestNodeNamed, binaryShares, type FlameJSON } from '../src/flame';
import { diffBucket, diffKind, diffColor, relativeChange, packageOf, binaryColor, DIFF_STEPS } from '../src/colors';
import { applyCompletion, completionAt, rankSuggestions } from '../src/complete';
import { sortRows } from '../src/table';
import { alignSeries, seriesMatchers, seriesLabel } from '../src/series';
import type { TopRow } from '../src/api';

describe('units', () => {
	it('formats bytes in binary units', () => {
		expect(formatBytes(0)).toBe('0 B');
		expect(formatBytes(1023)).toBe('1023 B');
		expect(formatBytes(1024)).toBe('1 KiB');
		expect(formatBytes(1536)).toBe('1.5 KiB');
		expect(formatBytes(5 * 1024 * 1024 * 1024)).toBe('5 GiB');
		expect(formatBytes(-2048)).toBe('-2 KiB');
	});
	it('formats counts and times', () => {
		expect(formatCount(999)).toBe('999');
		expect(formatCount(1234)).toBe('1.23k');
		expect(formatCount(2_500_000)).toBe('2.5M');
		expect(formatNanos(1500)).toBe('1.5 µs');
		expect(formatNanos(2_000_000_000)).toBe('2 s');
		expect(formatNanos(90e9)).toBe('1.5 min');
		expect(formatValue(10_000_000, 'nanoseconds')).toBe('10 ms');
		expect(formatValue(3 * 1024 * 1024, 'bytes')).toBe('3 MiB');
		expect(formatValue(42, 'count')).toBe('42');
	});
	it('formats percentages', () => {
		expect(formatPercent(1, 4)).toBe('25%');
		expect(formatPercent(1, 3)).toBe('33.3%');
		expect(formatPercent(0, 0)).toBe('0%');
		expect(formatPercent(1, 1e6)).toBe('<0.01%');
	});
	it('turns CPU time per profile into cores', () => {
		expect(cpuYMode('nanoseconds', 'cpu')).toBe('cores');
		expect(cpuYMode('bytes', 'space')).toBe('raw');
		// 5 s of CPU over 10 s between profiles = 0.5 cores; the first uses the next gap.
		const c = toCores([
			[0, 5e9],
			[10000, 5e9],
			[20000, 20e9],
		]);
		expect(c.map((p) => p[1])).toEqual([0.5, 0.5, 2]);
		expect(formatY(0.5, 'nanoseconds', 'cores')).toBe('0.5 cores');
		expect(formatY(1, 'nanoseconds', 'cores')).toBe('1 core');
		expect(formatY(0.25, 'nanoseconds', 'percent')).toBe('25%');
		expect(formatY(2048, 'bytes', 'raw')).toBe('2 KiB');
		expect(formatTicks([0.135, 0.14, 0.145], 'nanoseconds', 'cores')).toEqual(['0.135 cores', '0.140 cores', '0.145 cores']);
		expect(formatTicks([0.5, 1, 1.5], 'nanoseconds', 'percent')).toEqual(['50%', '100%', '150%']);
	});
	it('says how long ago', () => {
		expect(formatAgo(0, 5)).toBe('never');
		expect(formatAgo(1000, 6000)).toBe('5s ago');
		expect(formatAgo(0 + 1, 1 + 120000)).toBe('2 min ago');
	});
});

describe('URL state', () => {
	it('round-trips every field', () => {
		const st: ViewState = {
			...defaultState(),
			page: 'profiles',
			view: 'both',
			compare: true,
			a: { type: 'x:samples:count:cpu:nanoseconds:delta', matchers: 'job="a b",node=~"w.*"', range: { from: 1000, to: 5000 }, mode: 'single', time: 3000, series: 'job="a b"' },
			b: { type: 'x:samples:count:cpu:nanoseconds:delta', matchers: '', range: { preset: '6h' }, mode: 'merge', start: 10, end: 20 },
			focus: ['main.main', 'a;b{c}', 'ü&=?'],
			search: 'sha256',
			hide: ['/usr/lib/libc.so.6', '[kernel]'],
			sort: 'cum_pct',
			desc: false,
			filter: 'sort',
			frames: { focus: '^main\\.', ignore: 'runtime\\.gc', hide: 'a|b', prune: '' },
			sandwich: 'main.sha256',
			norm: 'total',
			sumBy: 'comm,pid',
			groupBy: 'comm',
		};
		const qs = encodeState(st);
		expect(decodeState(qs)).toEqual(st);
		expect(decodeState('?' + qs)).toEqual(st);
	});
	it('defaults to the last hour, merge, icicle', () => {
		const st = decodeState('');
		expect(st.a.range).toEqual({ preset: '1h' });
		expect(st.a.mode).toBe('merge');
		expect(st.view).toBe('icicle');
		expect(encodeState(defaultState())).toBe('a.range=1h&a.mode=merge');
		expect(resolveRange({ preset: '1h' }, 10_000_000)).toEqual([10_000_000 - 3600e3, 10_000_000]);
		expect(resolveRange({ preset: '7d' }, 1e12)).toEqual([1e12 - 7 * 86400e3, 1e12]);
	});
	it('ignores garbage from hand-edited links', () => {
		const st = decodeState('focus=%5Bbroken&sort=-nope&view=weird&a.range=99x&a.time=abc');
		expect(st.focus).toEqual([]);
		expect(st.sort).toBe('flat');
		expect(st.view).toBe('icicle');
		expect(st.a.range).toEqual({ preset: '1h' });
		expect(st.a.time).toBeUndefined();
	});
	it('sends frame filters and the sandwich to the server, and asks for a regression report only of two merges', () => {
		const st = defaultState();
		st.a.type = st.b.type = 't';
		st.a.range = { from: 0, to: 1000 };
		st.b.range = { from: 2000, to: 3000 };
		st.frames.focus = 'work';
		st.frames.prune = 'sort\\.';
		st.sandwich = 'main.f';
		expect(profileRequest(st, 0)).toEqual({ mode: 'merge', start: '0', end: '1000', query: 't{}', focus: 'work', prune_from: 'sort\\.', sandwich: 'main.f', sandwich_side: 'callees' });
		expect(regressionRequest(st, 0)).toBeNull();
		st.compare = true;
		expect(regressionRequest(st, 0)).toEqual({
			mode: 'diff', a_mode: 'merge', a_start: '0', a_end: '1000', a_query: 't{}',
			b_mode: 'merge', b_start: '2000', b_end: '3000', b_query: 't{}', focus: 'work', prune_from: 'sort\\.',
		});
		st.b.mode = 'single';
		st.b.time = 2500;
		expect(regressionRequest(st, 0)).toBeNull();
	});
	it('pins relative ranges in shared links and builds API parameters', () => {
		const st = defaultState();
		st.a.type = 't';
		st.a.matchers = 'job="x"';
		const frozen = freezeRanges(st, 7_200_000);
		expect(frozen.a.range).toEqual({ from: 3_600_000, to: 7_200_000 });
		expect(profileRequest(frozen, 0)).toEqual({ mode: 'merge', start: '3600000', end: '7200000', query: 't{job="x"}' });
		st.a.mode = 'single';
		st.a.time = 42;
		st.a.series = 'job="x",node="n1"';
		expect(profileRequest(st, 0)).toEqual({ mode: 'single', time: '42', query: 't{job="x",node="n1"}' });
		st.compare = true;
		st.b = { type: 't', matchers: '', range: { from: 1, to: 2 }, mode: 'merge' };
		st.hide = ['a', 'b'];
		expect(profileRequest(st, 0)).toEqual({
			mode: 'diff',
			a_mode: 'single',
			a_time: '42',
			a_query: 't{job="x",node="n1"}',
			b_mode: 'merge',
			b_start: '1',
			b_end: '2',
			b_query: 't{}',
			hide_binaries: 'a,b',
		});
	});
});

// root(10) → a(6) → c(4 self) ; a self 2 ; root → b(4) → c(1), b self 3
function sample(diff?: number[]): FlameJSON {
	return {
		unit: 'count',
		total: 10,
		height: 2,
		strings: ['', 'total', 'a', 'b', 'c', 'bin1', 'bin2', 'f.c'],
		nodes: {
			name: [1, 2, 4, 3, 4],
			binary: [0, 5, 6, 5, 6],
			file: [0, 7, 7, 7, 7],
			line: [0, 1, 2, 3, 4],
			depth: [0, 1, 2, 1, 2],
			parent: [-1, 0, 1, 0, 3],
			cum: [10, 6, 4, 4, 1],
			self: [0, 2, 4, 3, 1],
			...(diff ? { diff } : {}),
		},
	};
}

describe('icicle layout', () => {
	const f = decodeFlame(sample());
	it('lays children left to right inside their parent', () => {
		expect([...f.x]).toEqual([0, 0, 0, 6, 6]);
		expect([...f.end]).toEqual([5, 3, 3, 5, 5]);
		expect(f.height).toBe(2);
	});
	it('draws only visible nodes at least 1 px wide', () => {
		expect(visibleNodes(f, { x0: 0, w: 10 }, 1000)).toEqual([0, 1, 2, 3, 4]);
		// Zoomed into b: a's subtree is outside the window and skipped whole.
		expect(visibleNodes(f, { x0: 6, w: 4 }, 1000)).toEqual([0, 3, 4]);
		// 10 px wide: c under b is 1 px; with a 2 px minimum it is skipped.
		expect(visibleNodes(f, { x0: 0, w: 10 }, 10, 2)).toEqual([0, 1, 2, 3]);
	});
	it('finds the node under a point and follows name paths', () => {
		expect(nodeAt(f, 3.5, 2)).toBe(2);
		expect(nodeAt(f, 5.5, 2)).toBe(-1); // a's own time: nothing below
		expect(nodeAt(f, 6.5, 2)).toBe(4);
		expect(nodeAt(f, 9.5, 2)).toBe(-1);
		expect(nodeAt(f, 9.5, 1)).toBe(3);
		expect(pathOf(f, 4)).toEqual(['b', 'c']);
		expect(nodeOfPath(f, ['b', 'c'])).toBe(4);
		expect(nodeOfPath(f, ['b', 'zz'])).toBe(-1);
		expect(nodeOfPath(f, [])).toBe(0);
	});
	it('computes the share of search matches without double counting', () => {
		const m = searchMask(f, 'C')!;
		expect([...m]).toEqual([0, 0, 1, 0, 1]);
		expect(matchedValue(f, m)).toBe(5);
		const m2 = searchMask(f, 'a')!; // "a" — and "total" is the root, never matched
		expect(matchedValue(f, m2)).toBe(6);
		expect(searchMask(f, '')).toBeNull();
		expect(widestNodeNamed(f, 'c')).toBe(2);
	});
	it('sums self per binary for the legend', () => {
		expect(binaryShares(f)).toEqual([
			{ binary: 'bin1', value: 5 },
			{ binary: 'bin2', value: 5 },
		]);
	});
	it('handles 100k nodes in linear time', () => {
		const n = 100_000;
		const j: FlameJSON = { unit: 'count', total: n, height: 2, strings: ['', 'total', 'f'], nodes: { name: [], binary: [], file: [], line: [], depth: [], parent: [], cum: [], self: [] } };
		const N = j.nodes;
		const push = (p: number, d: number, c: number) => {
			N.name.push(d ? 2 : 1);
			N.binary.push(0);
			N.file.push(0);
			N.line.push(0);
			N.depth.push(d);
			N.parent.push(p);
			N.cum.push(c);
			N.self.push(d === 2 ? c : 0);
		};
		push(-1, 0, n - 1);
		for (let k = 0; k < (n - 1) / 2; k++) {
			const p = N.name.length;
			push(0, 1, 2);
			push(p, 2, 2);
		}
		const big = decodeFlame(j);
		expect(big.x[big.n - 1]).toBe(big.x[big.n - 2]);
		// At 1000 px only a bounded number of nodes is visited and drawn.
		expect(visibleNodes(big, { x0: 0, w: big.cum[0] }, 1000).length).toBe(1);
		expect(visibleNodes(big, { x0: 0, w: 200 }, 1000).length).toBe(1 + 200);
	});
});

describe('diff colouring', () => {
	it('classifies relative change', () => {
		// cum = B, diff = B - A.
		expect(relativeChange(150, 50)).toBe(0.5); // A=100 → B=150
		expect(relativeChange(50, -50)).toBe(-0.5);
		expect(relativeChange(10, 10)).toBe(Infinity); // new in B
		expect(diffKind(150, 50)).toBe('worse');
		expect(diffKind(50, -50)).toBe('better');
		expect(diffKind(101, 1)).toBe('neutral');
		expect(diffBucket(100, 0)).toBe(0);
		expect(diffBucket(400, 300)).toBe(DIFF_STEPS); // +300 % clamps to full red
		expect(diffBucket(0, -100)).toBe(-DIFF_STEPS); // gone in B: full green
		expect(diffBucket(150, 50)).toBe(DIFF_STEPS / 2);
	});
	it('maps worse to red, better to green, unchanged to lavender', () => {
		const hue = (c: string) => Number(/hsl\((\d+)/.exec(c)![1]);
		expect(hue(diffColor(400, 300, false))).toBe(0);
		expect(hue(diffColor(0, -100, false))).toBe(130);
		expect(hue(diffColor(100, 0, false))).toBe(250);
		expect(diffColor(400, 300, true)).not.toBe(diffColor(400, 300, false));
		// The diff report decodes with its diff column.
		const f = decodeFlame(sample([2, 3, 4, -1, 0]));
		expect(f.diff && [...f.diff]).toEqual([2, 3, 4, -1, 0]);
	});
	it('colours by binary or package stably', () => {
		expect(binaryColor('/usr/bin/a', false)).toBe(binaryColor('/usr/bin/a', false));
		expect(packageOf('crypto/sha256.(*digest).Write')).toBe('crypto/sha256');
		expect(packageOf('main.work')).toBe('main');
		expect(packageOf('std::vector<int>::push_back')).toBe('std');
		expect(packageOf('malloc')).toBe('');
		expect(packageOf('[libc.so.6] +0x1234')).toBe('');
		expect(packageOf('github.com/x/y.(*T).M')).toBe('github.com/x/y');
	});
});

describe('matcher autocomplete', () => {
	it('suggests names at a fresh position or in a name', () => {
		expect(completionAt('', 0)).toEqual({ kind: 'name', prefix: '', start: 0, end: 0 });
		expect(completionAt('jo', 2)).toEqual({ kind: 'name', prefix: 'jo', start: 0, end: 2 });
		expect(completionAt('job="a", no', 11)).toEqual({ kind: 'name', prefix: 'no', start: 9, end: 11 });
	});
	it('suggests values after an operator', () => {
		expect(completionAt('job="', 5)).toMatchObject({ kind: 'value', label: 'job', prefix: '', quoted: true });
		expect(completionAt('job=~"ap', 8)).toMatchObject({ kind: 'value', label: 'job', prefix: 'ap', start: 6 });
		expect(completionAt('job!=', 5)).toMatchObject({ kind: 'value', label: 'job', quoted: false });
		expect(completionAt('job="a"', 7)).toEqual({ kind: 'none' });
	});
	it('inserts a choice', () => {
		const c = completionAt('jo', 2);
		expect(applyCompletion('jo', c, 'job')).toEqual({ text: 'job="', cursor: 5 });
		const v = completionAt('job="a', 6);
		expect(applyCompletion('job="a', v, 'api')).toEqual({ text: 'job="api"', cursor: 9 });
		const q = completionAt('job=', 4);
		expect(applyCompletion('job=', q, 'x"y')).toEqual({ text: 'job="x\\"y"', cursor: 10 });
		expect(rankSuggestions(['node', 'job', 'ajob'], 'jo')).toEqual(['job', 'ajob']);
	});
});

describe('table and series', () => {
	const rows: TopRow[] = [
		{ name: 'b', binary: 'x', file: 'f.go', line: 1, flat: 5, cum: 9, diff_flat: -1, diff_cum: 3 },
		{ name: 'a', binary: 'x', file: 'g.go', line: 1, flat: 7, cum: 7, diff_flat: 2, diff_cum: -4 },
		{ name: 'c', binary: 'y', file: 'h.go', line: 1, flat: 1, cum: 12, diff_flat: 0, diff_cum: 0 },
	];
	it('sorts by any column and filters', () => {
		expect(sortRows(rows, 20, 'flat', true, '').map((r) => r.name)).toEqual(['a', 'b', 'c']);
		expect(sortRows(rows, 20, 'cum', true, '').map((r) => r.name)).toEqual(['c', 'b', 'a']);
		expect(sortRows(rows, 20, 'name', false, '').map((r) => r.name)).toEqual(['a', 'b', 'c']);
		expect(sortRows(rows, 20, 'diff_cum', true, '').map((r) => r.name)).toEqual(['b', 'c', 'a']);
		expect(sortRows(rows, 20, 'flat', true, 'h.go').map((r) => r.name)).toEqual(['c']);
		expect(sortRows(rows, 20, 'flat', true, 'Y').map((r) => r.name)).toEqual(['c']);
	});
	it('aligns series on a shared time axis', () => {
		expect(
			alignSeries([
				[
					[1, 10],
					[3, 30],
				],
				[[2, 5]],
			]),
		).toEqual([
			[1, 2, 3],
			[10, null, 30],
			[null, 5, null],
		]);
		const s = { labels: { node: 'n"1', job: 'a' }, points: [] as [number, number][] };
		expect(seriesLabel(s)).toBe('{job="a", node="n"1"}');
		expect(seriesMatchers(s)).toBe('job="a",node="n\\"1"');
	});
});

describe('targets', () => {
	it('groups targets by job, sorted by job then endpoint', async () => {
		const { groupByJob } = await import('../src/targets');
		const t = (job: string, url: string, health = 'up') => ({ job, url, labels: {}, health, last_scrape: 0, last_scrape_duration_ms: 0, last_error: '' });
		const g = groupByJob([t('web', 'http://b/'), t('api', 'http://z/', 'down'), t('web', 'http://a/'), t('api', 'http://y/')]);
		expect([...g.keys()]).toEqual(['api', 'web']);
		expect(g.get('web')!.map((x) => x.url)).toEqual(['http://a/', 'http://b/']);
		expect(g.get('api')!.map((x) => x.health)).toEqual(['up', 'down']);
	});
});

describe('target matchers', () => {
	it('selects a target by its labels, without the profile name', async () => {
		const { targetMatchers } = await import('../src/targets');
		const t = { job: 'api', url: 'http://h:1/debug/pprof/profile', labels: { __name__: 'process_cpu', job: 'api', instance: 'h:1', env: 'a"b' }, health: 'up', last_scrape: 0, last_scrape_duration_ms: 0, last_error: '' };
		expect(targetMatchers(t)).toBe('env="a\\"b", instance="h:1", job="api"');
	});
});
