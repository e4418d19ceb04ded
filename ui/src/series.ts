// Pure helpers for the metrics graph's series (unit-tested under Node).

import type { Series } from './api';
import { hashString } from './colors';

export function seriesLabel(s: Series): string {
	const keys = Object.keys(s.labels).filter((k) => k !== '__name__').sort();
	return '{' + keys.map((k) => `${k}="${s.labels[k]}"`).join(', ') + '}';
}

/** Legend text per series: with several series, only the labels whose values
 * differ between them (a shared job="x" on 400 lines says nothing); one
 * series keeps its whole label set. */
export function legendLabels(series: Series[]): string[] {
	if (series.length < 2) return series.map(seriesLabel);
	const keys = new Set(series.flatMap((s) => Object.keys(s.labels).filter((k) => k !== '__name__')));
	const differ = [...keys].filter((k) => new Set(series.map((s) => s.labels[k] ?? '')).size > 1).sort();
	return series.map((s) => '{' + differ.filter((k) => k in s.labels).map((k) => `${k}="${s.labels[k]}"`).join(', ') + '}');
}

/** Matchers pinning exactly this series (for a single-profile query). */
export function seriesMatchers(s: Series): string {
	const keys = Object.keys(s.labels).filter((k) => k !== '__name__').sort();
	return keys.map((k) => `${k}="${s.labels[k].replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',');
}

export function seriesColor(i: number, label: string): string {
	const hues = [210, 25, 140, 280, 355, 45, 185, 320, 95, 240];
	return `hsl(${hues[(i + (hashString(label) % 3)) % hues.length]}, 70%, 50%)`;
}

/** Union of timestamps with nulls where a series has no profile (uPlot's aligned data). */
export function alignSeries(series: [number, number][][]): (number | null)[][] {
	const ts = [...new Set(series.flatMap((p) => p.map((x) => x[0])))].sort((a, b) => a - b);
	const idx = new Map(ts.map((t, i) => [t, i]));
	const out: (number | null)[][] = [ts];
	for (const pts of series) {
		const col: (number | null)[] = new Array(ts.length).fill(null);
		for (const [t, v] of pts) col[idx.get(t)!] = (col[idx.get(t)!] ?? 0) + v;
		out.push(col);
	}
	return out;
}
