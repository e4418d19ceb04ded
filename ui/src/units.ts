// Value formatting in a profile's unit. Pure functions (unit-tested under Node).

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
const COUNT_UNITS = ['', 'k', 'M', 'G', 'T', 'P'];

function trim(n: number, digits: number): string {
	// toPrecision without exponent notation and without trailing zeros.
	const s = n.toFixed(Math.max(0, digits - Math.max(1, Math.floor(Math.log10(Math.abs(n) || 1)) + 1)));
	return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

export function formatBytes(v: number): string {
	const neg = v < 0;
	let a = Math.abs(v);
	let i = 0;
	while (a >= 1024 && i < BYTE_UNITS.length - 1) {
		a /= 1024;
		i++;
	}
	return (neg ? '-' : '') + trim(a, 3) + ' ' + BYTE_UNITS[i];
}

export function formatCount(v: number): string {
	const neg = v < 0;
	let a = Math.abs(v);
	let i = 0;
	while (a >= 1000 && i < COUNT_UNITS.length - 1) {
		a /= 1000;
		i++;
	}
	return (neg ? '-' : '') + trim(a, 3) + COUNT_UNITS[i];
}

export function formatNanos(v: number): string {
	const neg = v < 0;
	const a = Math.abs(v);
	let s: string;
	if (a >= 3600e9) s = trim(a / 3600e9, 3) + ' h';
	else if (a >= 60e9) s = trim(a / 60e9, 3) + ' min';
	else if (a >= 1e9) s = trim(a / 1e9, 3) + ' s';
	else if (a >= 1e6) s = trim(a / 1e6, 3) + ' ms';
	else if (a >= 1e3) s = trim(a / 1e3, 3) + ' µs';
	else s = trim(a, 3) + ' ns';
	return (neg ? '-' : '') + s;
}

/** A value in the profile's sample unit, human readable. */
export function formatValue(v: number, unit: string): string {
	switch (unit) {
		case 'bytes':
			return formatBytes(v);
		case 'nanoseconds':
			return formatNanos(v);
		case 'microseconds':
			return formatNanos(v * 1e3);
		case 'milliseconds':
			return formatNanos(v * 1e6);
		case 'seconds':
			return formatNanos(v * 1e9);
		default:
			return formatCount(v);
	}
}

export function formatPercent(part: number, whole: number): string {
	if (!whole) return '0%';
	const p = (100 * part) / whole;
	if (p !== 0 && Math.abs(p) < 0.01) return (p < 0 ? '-' : '') + '<0.01%';
	return trim(p, 3) + '%';
}

export function formatSigned(v: number, unit: string): string {
	return (v > 0 ? '+' : '') + formatValue(v, unit);
}

/** How the metrics graph shows the y axis. */
export type YMode = 'raw' | 'cores' | 'percent';

/** CPU time per profile → average cores busy over each profile's interval. */
export function cpuYMode(unit: string, periodType: string | undefined): YMode {
	return unit === 'nanoseconds' && periodType === 'cpu' ? 'cores' : 'raw';
}

/**
 * Converts one series' points (ts ms, value in ns of CPU) into cores: the
 * value divided by the time since the previous profile of the same series
 * (the first point uses the gap to the next one; a lone point assumes 10 s,
 * the default profiling duration).
 */
export function toCores(points: [number, number][]): [number, number][] {
	const out: [number, number][] = [];
	for (let i = 0; i < points.length; i++) {
		let dt = 0;
		if (i > 0) dt = points[i][0] - points[i - 1][0];
		else if (points.length > 1) dt = points[1][0] - points[0][0];
		if (dt <= 0) dt = 10000;
		out.push([points[i][0], points[i][1] / (dt * 1e6)]);
	}
	return out;
}

export function formatY(v: number, unit: string, mode: YMode): string {
	if (mode === 'cores') return trim(v, 3) + (Math.abs(v) === 1 ? ' core' : ' cores');
	if (mode === 'percent') return trim(v * 100, 3) + '%';
	return formatValue(v, unit);
}

export function formatDuration(ms: number): string {
	if (ms < 1000) return Math.round(ms) + ' ms';
	return formatNanos(ms * 1e6);
}

/** "3s ago", "5 min ago"; for the targets page. */
export function formatAgo(ts: number, now: number): string {
	if (!ts) return 'never';
	const d = Math.max(0, now - ts);
	if (d < 1000) return 'just now';
	if (d < 60000) return Math.floor(d / 1000) + 's ago';
	if (d < 3600000) return Math.floor(d / 60000) + ' min ago';
	if (d < 86400000) return Math.floor(d / 3600000) + ' h ago';
	return Math.floor(d / 86400000) + ' d ago';
}

/** Axis tick labels: enough decimals that neighbouring ticks differ (cores and % modes). */
export function formatTicks(splits: number[], unit: string, mode: YMode): string[] {
	if (mode === 'raw' || splits.length < 2) return splits.map((v) => formatY(v, unit, mode));
	const k = mode === 'percent' ? 100 : 1;
	const step = Math.abs(splits[1] - splits[0]) * k || 1;
	const dec = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step))));
	return splits.map((v) => (v * k).toFixed(dec) + (mode === 'percent' ? '%' : ' cores'));
}
