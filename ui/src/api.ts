// The server's HTTP/JSON API (docs/API.md). Relative URLs:
// the UI is served by the same `kiln` that answers the API.

import { authFetch } from './auth';
import type { FlameJSON } from './flame';

export class ApiError extends Error {
	status: number;
	position?: number;
	constructor(message: string, status: number, position?: number) {
		super(message);
		this.status = status;
		this.position = position;
	}
}

export interface ProfileType {
	key: string;
	name: string;
	sample_type: string;
	sample_unit: string;
	period_type: string;
	period_unit: string;
	delta: boolean;
}

export interface Series {
	labels: Record<string, string>;
	points: [number, number][];
}

export interface RangeResult {
	series: Series[];
	unit: string;
}

export interface TopRow {
	name: string;
	binary: string;
	file: string;
	line: number;
	flat: number;
	cum: number;
	diff_flat?: number;
	diff_cum?: number;
}

export interface TopResult {
	unit: string;
	total: number;
	filtered?: number;
	rows: TopRow[];
}

export interface RegressionRow {
	name: string;
	binary: string;
	verdict: 'regression' | 'improvement' | 'unchanged' | 'not_enough_data';
	a_total_share: number;
	b_total_share: number;
	a_self_share: number;
	b_self_share: number;
	delta_total_pp: number;
	delta_self_pp: number;
	p: number;
	q: number;
	effect: number;
}

export interface RegressionResult {
	test: string;
	alpha: number;
	threshold_pp: number;
	a_windows: number;
	b_windows: number;
	rows: RegressionRow[];
}

export interface Target {
	job: string;
	url: string;
	labels: Record<string, string>;
	health: string;
	last_scrape: number;
	last_scrape_duration_ms: number;
	last_error: string;
}

export interface TargetsResult {
	active: Target[];
	dropped: Target[];
}

export function apiUrl(path: string, params: Record<string, string | undefined>): string {
	const p = new URLSearchParams();
	for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') p.set(k, v);
	const qs = p.toString();
	return path + (qs ? '?' + qs : '');
}

/** Bytes of the last JSON responses (the bench reads it: API bytes per node). */
export const apiStats = { lastBytes: 0, fetchMs: 0, jsonMs: 0 };

async function getJSON<T>(path: string, params: Record<string, string | undefined>, signal?: AbortSignal): Promise<T> {
	let res: Response;
	const t0 = performance.now();
	try {
		res = await authFetch(apiUrl(path, params), { signal, headers: { Accept: 'application/json' } });
	} catch (e) {
		if ((e as Error).name === 'AbortError') throw e;
		throw new ApiError('cannot reach the kiln server: ' + (e as Error).message, 0);
	}
	const text = await res.text();
	apiStats.lastBytes = text.length;
	apiStats.fetchMs = performance.now() - t0;
	if (!res.ok) {
		let msg = `HTTP ${res.status}`;
		let pos: number | undefined;
		try {
			const j = JSON.parse(text);
			if (j && typeof j.error === 'string') msg = j.error;
			if (j && typeof j.position === 'number') pos = j.position;
		} catch {
			if (text.trim()) msg += ': ' + text.trim().slice(0, 200);
		}
		throw new ApiError(msg, res.status, pos);
	}
	try {
		const t1 = performance.now();
		const v = JSON.parse(text) as T;
		apiStats.jsonMs = performance.now() - t1;
		return v;
	} catch {
		throw new ApiError(`${path}: the server's answer is not JSON`, res.status);
	}
}

export const api = {
	profileTypes: (start: number, end: number, signal?: AbortSignal) =>
		getJSON<{ types: ProfileType[] }>('/api/v1/profile-types', { start: String(start), end: String(end) }, signal),
	labels: (query: string, start: number, end: number, signal?: AbortSignal) =>
		getJSON<{ names: string[] }>('/api/v1/labels', { query, start: String(start), end: String(end) }, signal),
	values: (label: string, query: string, start: number, end: number, signal?: AbortSignal) =>
		getJSON<{ values: string[] }>('/api/v1/values', { label, query, start: String(start), end: String(end) }, signal),
	queryRange: (query: string, start: number, end: number, signal?: AbortSignal, sumBy = '', limit = 0) =>
		getJSON<RangeResult>('/api/v1/query_range', { query, start: String(start), end: String(end), sum_by: sumBy, limit: limit ? String(limit) : undefined }, signal),
	flame: (params: Record<string, string>, signal?: AbortSignal) =>
		getJSON<FlameJSON>('/api/v1/query', { ...params, report: 'flamegraph' }, signal),
	top: (params: Record<string, string>, signal?: AbortSignal) =>
		getJSON<TopResult>('/api/v1/query', { ...params, report: 'top' }, signal),
	regression: (params: Record<string, string>, signal?: AbortSignal) =>
		getJSON<RegressionResult>('/api/v1/query', { ...params, report: 'regression', limit: '200' }, signal),
	targets: (signal?: AbortSignal) => getJSON<TargetsResult>('/api/v1/targets', { state: 'any' }, signal),
	downloadUrl: (params: Record<string, string>, report: 'pprof' | 'folded') =>
		apiUrl('/api/v1/query', { ...params, report }),
};
