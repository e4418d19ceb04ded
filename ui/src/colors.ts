// Colours: by binary for a normal icicle graph, by relative change for a diff.
// Pure (unit-tested under Node).

/** A stable small hash of a string (FNV-1a). */
export function hashString(s: string): number {
	let h = 0x811c9dc5;
	for (let i = 0; i < s.length; i++) {
		h ^= s.charCodeAt(i);
		h = Math.imul(h, 0x01000193);
	}
	return h >>> 0;
}

// Warm, distinguishable hues (no pure red/green: those mean "diff").
const HUES = [28, 45, 200, 265, 175, 310, 215, 60, 340, 240, 15, 190];

export function binaryColor(binary: string, dark: boolean): string {
	const h = HUES[hashString(binary || '?') % HUES.length];
	const s = 62 + (hashString(binary + '#') % 12);
	const l = dark ? 40 + (hashString(binary + '!') % 10) : 62 + (hashString(binary + '!') % 10);
	return `hsl(${h}, ${s}%, ${l}%)`;
}

/**
 * Relative change of a node between A and B: diff = B - A on the cumulative
 * value, cum = B's value. Returns diff / A (A = cum - diff); +Infinity if the
 * frame is new in B.
 */
export function relativeChange(cum: number, diff: number): number {
	const base = cum - diff;
	if (base <= 0) return diff > 0 ? Infinity : 0;
	return diff / base;
}

/** |change| below this is drawn neutral. */
export const NEUTRAL_THRESHOLD = 0.02;

/** Kind of change, for tests and the legend. */
export function diffKind(cum: number, diff: number): 'worse' | 'better' | 'neutral' {
	const r = relativeChange(cum, diff);
	if (r > NEUTRAL_THRESHOLD) return 'worse';
	if (r < -NEUTRAL_THRESHOLD) return 'better';
	return 'neutral';
}

/** Number of intensity steps per side (colour strings are cached per step). */
export const DIFF_STEPS = 10;

/**
 * Bucket of a relative change: 0 = neutral, 1..STEPS = worse (red),
 * -1..-STEPS = better (green); full intensity at ±100 %.
 */
export function diffBucket(cum: number, diff: number): number {
	const r = relativeChange(cum, diff);
	if (Math.abs(r) <= NEUTRAL_THRESHOLD) return 0;
	const mag = Math.min(1, Math.abs(r));
	const step = Math.max(1, Math.ceil(mag * DIFF_STEPS));
	return r > 0 ? step : -step;
}

export function diffBucketColor(bucket: number, dark: boolean): string {
	if (bucket === 0) return dark ? 'hsl(250, 18%, 45%)' : 'hsl(250, 35%, 82%)'; // lavender: unchanged
	const t = Math.abs(bucket) / DIFF_STEPS;
	const hue = bucket > 0 ? 0 : 130;
	const sat = 45 + 40 * t;
	const light = dark ? 42 - 14 * t + 14 : 80 - 35 * t;
	return `hsl(${hue}, ${Math.round(sat)}%, ${Math.round(light)}%)`;
}

export function diffColor(cum: number, diff: number, dark: boolean): string {
	return diffBucketColor(diffBucket(cum, diff), dark);
}

/**
 * The package of a function name, for colouring when a profile has a single
 * binary: Go "crypto/sha256.(*digest).Write" → "crypto/sha256", C++
 * "std::vector<int>::push_back" → "std", Rust "core::ptr::drop" → "core";
 * C names and unsymbolized frames have none ("").
 */
export function packageOf(name: string): string {
	if (!name || name.startsWith('[') || name.startsWith('0x')) return '';
	const cpp = name.indexOf('::');
	const paren = name.indexOf('(');
	if (cpp > 0 && (paren < 0 || cpp < paren) && !name.slice(0, cpp).includes('.')) return name.slice(0, cpp);
	const slash = name.lastIndexOf('/', paren >= 0 ? paren : name.length);
	const dot = name.indexOf('.', slash + 1);
	if (dot > 0) return name.slice(0, dot);
	return '';
}
