// The flame graph report (columnar JSON, nodes in depth-first pre-order) as
// typed arrays, and the icicle layout computed once per profile: each node's
// x offset in value units and the index just past its subtree, so that the
// renderer can skip a whole invisible subtree in one step. Pure.

export interface FlameJSON {
	unit: string;
	total: number;
	filtered?: number;
	base_scale?: number; // diff: A's values were multiplied by this
	height: number;
	strings: string[];
	nodes: {
		name: number[];
		binary: number[];
		file: number[];
		line: number[];
		depth: number[];
		parent: number[];
		cum: number[];
		self: number[];
		diff?: number[];
	};
}

export interface Flame {
	unit: string;
	total: number;
	filtered: number;
	baseScale: number;
	height: number; // deepest depth
	n: number;
	strings: string[];
	name: Int32Array;
	binary: Int32Array;
	file: Int32Array;
	line: Int32Array;
	depth: Int32Array;
	parent: Int32Array;
	cum: Float64Array;
	self: Float64Array;
	diff: Float64Array | null;
	x: Float64Array; // left edge in value units (root at 0)
	end: Int32Array; // index just past the node's subtree
}

// Typed-array constructors convert a JS array natively (much faster than a loop).
function i32(a: number[] | undefined, n: number): Int32Array {
	return a && a.length === n ? new Int32Array(a) : new Int32Array(n);
}

function f64(a: number[] | undefined, n: number): Float64Array {
	return a && a.length === n ? new Float64Array(a) : new Float64Array(n);
}

export function decodeFlame(j: FlameJSON): Flame {
	const n = j.nodes.name.length;
	const f: Flame = {
		unit: j.unit,
		total: j.total,
		filtered: j.filtered ?? j.total,
		baseScale: j.base_scale ?? 1,
		height: j.height,
		n,
		strings: j.strings,
		name: i32(j.nodes.name, n),
		binary: i32(j.nodes.binary, n),
		file: i32(j.nodes.file, n),
		line: i32(j.nodes.line, n),
		depth: i32(j.nodes.depth, n),
		parent: i32(j.nodes.parent, n),
		cum: f64(j.nodes.cum, n),
		self: f64(j.nodes.self, n),
		diff: j.nodes.diff ? f64(j.nodes.diff, n) : null,
		x: new Float64Array(n),
		end: new Int32Array(n),
	};
	layout(f);
	return f;
}

/**
 * x: children are laid left to right in the order given, each starting where
 * the previous sibling ended. end: subtree sizes accumulated bottom-up (pre-
 * order means every child comes after its parent). O(n).
 */
export function layout(f: Flame): void {
	const { n, parent, cum, x, end } = f;
	const cursor = new Float64Array(n);
	let height = 0;
	for (let i = 0; i < n; i++) {
		const p = parent[i];
		if (p < 0) {
			x[i] = 0;
		} else {
			x[i] = cursor[p];
			cursor[p] += cum[i];
		}
		cursor[i] = x[i];
		end[i] = 1; // subtree size for now
		if (f.depth[i] > height) height = f.depth[i];
	}
	for (let i = n - 1; i > 0; i--) {
		const p = parent[i];
		if (p >= 0) end[p] += end[i];
	}
	for (let i = 0; i < n; i++) end[i] += i;
	f.height = Math.max(f.height, height);
}

/** The visible window: value range [x0, x0+w) and the first depth drawn at the top. */
export interface Window {
	x0: number;
	w: number;
}

/** Nodes to draw for a window at a pixel width: visible and ≥ minPx wide. */
export function visibleNodes(f: Flame, win: Window, widthPx: number, minPx = 1, maxDepth = Infinity): number[] {
	const out: number[] = [];
	const scale = widthPx / win.w;
	const x1 = win.x0 + win.w;
	for (let i = 0; i < f.n; ) {
		const l = f.x[i];
		const r = l + f.cum[i];
		if (r <= win.x0 || l >= x1 || f.depth[i] > maxDepth) {
			i = f.end[i];
			continue;
		}
		const pw = (Math.min(r, x1) - Math.max(l, win.x0)) * scale;
		if (pw < minPx) {
			i = f.end[i];
			continue;
		}
		out.push(i);
		i++;
	}
	return out;
}

/** The node under (value x, depth row) in the tree, or -1. O(depth × fan-out). */
export function nodeAt(f: Flame, vx: number, depth: number): number {
	if (f.n === 0 || vx < 0 || vx >= f.cum[0] || depth < 0) return -1;
	let cur = 0;
	while (f.depth[cur] < depth) {
		let c = cur + 1;
		let found = -1;
		while (c < f.end[cur]) {
			if (vx >= f.x[c] && vx < f.x[c] + f.cum[c]) {
				found = c;
				break;
			}
			c = f.end[c];
		}
		if (found < 0) return -1;
		cur = found;
	}
	return cur;
}

/** Root-to-node path of function names (root excluded), for the URL. */
export function pathOf(f: Flame, i: number): string[] {
	const out: string[] = [];
	while (i > 0) {
		out.push(f.strings[f.name[i]]);
		i = f.parent[i];
	}
	return out.reverse();
}

/** The node a path of names leads to (the widest child at each ambiguous step), or -1. */
export function nodeOfPath(f: Flame, path: string[]): number {
	let cur = 0;
	if (f.n === 0) return -1;
	for (const name of path) {
		let best = -1;
		for (let c = cur + 1; c < f.end[cur]; c = f.end[c]) {
			if (f.strings[f.name[c]] === name && (best < 0 || f.cum[c] > f.cum[best])) best = c;
		}
		if (best < 0) return -1;
		cur = best;
	}
	return cur;
}

/** Per-node mask of nodes whose function name contains `text` (case-insensitive). */
export function searchMask(f: Flame, text: string): Uint8Array | null {
	if (!text) return null;
	const t = text.toLowerCase();
	const hit = new Uint8Array(f.strings.length);
	for (let s = 0; s < f.strings.length; s++) hit[s] = f.strings[s].toLowerCase().includes(t) ? 1 : 0;
	const m = new Uint8Array(f.n);
	for (let i = 1; i < f.n; i++) m[i] = hit[f.name[i]];
	return m;
}

/** Share of the total in matching frames, each stack counted once (nested matches not added twice). */
export function matchedValue(f: Flame, mask: Uint8Array): number {
	let sum = 0;
	for (let i = 0; i < f.n; ) {
		if (mask[i]) {
			sum += f.cum[i];
			i = f.end[i];
		} else i++;
	}
	return sum;
}

/** The widest node of a function name (table row click → icicle focus), or -1. */
export function widestNodeNamed(f: Flame, name: string): number {
	let best = -1;
	for (let i = 1; i < f.n; i++) {
		if (f.strings[f.name[i]] === name && (best < 0 || f.cum[i] > f.cum[best])) best = i;
	}
	return best;
}

/** Total value per binary (each stack counted once per binary), largest first; for the legend. */
export function binaryShares(f: Flame): { binary: string; value: number }[] {
	const by = new Map<number, number>();
	for (let i = 1; i < f.n; i++) by.set(f.binary[i], (by.get(f.binary[i]) ?? 0) + f.self[i]);
	return [...by.entries()]
		.map(([b, v]) => ({ binary: f.strings[b] || '(unknown)', value: v }))
		.sort((a, b) => b.value - a.value || a.binary.localeCompare(b.binary));
}

/** Table rows computed from the tree (used when the top report is not fetched). */
export function ancestorsOf(f: Flame, i: number): number[] {
	const out: number[] = [];
	while (i >= 0) {
		out.push(i);
		i = f.parent[i];
	}
	return out.reverse();
}

/** Self value per package (colour legend when a profile has one binary), largest first. */
export function packageShares(f: Flame, pkg: (name: string) => string): { key: string; value: number }[] {
	const by = new Map<string, number>();
	for (let i = 1; i < f.n; i++) {
		const k = pkg(f.strings[f.name[i]]) || f.strings[f.binary[i]] || '(unknown)';
		by.set(k, (by.get(k) ?? 0) + f.self[i]);
	}
	return [...by.entries()].map(([key, value]) => ({ key, value })).sort((a, b) => b.value - a.value);
}
