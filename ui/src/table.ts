// The table view (top report): function, flat, flat %, cum, cum % and, when
// comparing, the diff columns; sort by any column, filter by text; a row
// click focuses the function in the icicle graph.

import type { TopResult, TopRow } from './api';
import { h } from './dom';
import { formatPercent, formatSigned, formatValue } from './units';

export interface TableCallbacks {
	onSort(col: string, desc: boolean): void;
	onFilter(text: string): void;
	onRow(name: string): void;
}

interface Col {
	key: string;
	label: string;
	num: boolean;
	get(r: TopRow, total: number): number | string;
}

const COLS: Col[] = [
	{ key: 'name', label: 'Function', num: false, get: (r) => r.name },
	{ key: 'flat', label: 'Flat', num: true, get: (r) => r.flat },
	{ key: 'flat_pct', label: 'Flat %', num: true, get: (r, t) => (t ? r.flat / t : 0) },
	{ key: 'cum', label: 'Cum', num: true, get: (r) => r.cum },
	{ key: 'cum_pct', label: 'Cum %', num: true, get: (r, t) => (t ? r.cum / t : 0) },
];
const DIFF_COLS: Col[] = [
	{ key: 'diff_flat', label: 'Diff flat', num: true, get: (r) => r.diff_flat ?? 0 },
	{ key: 'diff_cum', label: 'Diff cum', num: true, get: (r) => r.diff_cum ?? 0 },
];

/** Rows filtered by text (function, file or binary) and sorted by a column. Pure. */
export function sortRows(rows: TopRow[], total: number, col: string, desc: boolean, filter: string): TopRow[] {
	const c = [...COLS, ...DIFF_COLS].find((x) => x.key === col) ?? COLS[1];
	const f = filter.toLowerCase();
	const kept = f
		? rows.filter((r) => r.name.toLowerCase().includes(f) || r.file.toLowerCase().includes(f) || r.binary.toLowerCase().includes(f))
		: rows.slice();
	kept.sort((a, b) => {
		const va = c.get(a, total);
		const vb = c.get(b, total);
		let d = typeof va === 'string' ? va.localeCompare(vb as string) : (va as number) - (vb as number);
		if (d === 0) d = a.name.localeCompare(b.name);
		return desc ? -d : d;
	});
	return kept;
}

export class Table {
	readonly el: HTMLElement;
	private filterIn: HTMLInputElement;
	private body: HTMLElement;
	private head: HTMLElement;
	private countEl: HTMLElement;
	private data: TopResult | null = null;
	private diff = false;
	private col = 'flat';
	private desc = true;
	private cb: TableCallbacks;
	static readonly MAX_ROWS = 2000;

	constructor(cb: TableCallbacks) {
		this.cb = cb;
		this.filterIn = h('input.table-filter', { testid: 'table-filter', placeholder: 'Filter functions, files, binaries…', type: 'search' });
		this.filterIn.addEventListener('input', () => {
			this.cb.onFilter(this.filterIn.value);
			this.render();
		});
		this.head = h('thead');
		this.body = h('tbody');
		this.countEl = h('span.table-count');
		this.el = h('div.table-view', { testid: 'table-view' }, h('div.table-tools', {}, this.filterIn, this.countEl), h('div.table-scroll', {}, h('table.top', {}, this.head, this.body)));
	}

	set(data: TopResult, diff: boolean, col: string, desc: boolean, filter: string): void {
		this.data = data;
		this.diff = diff;
		this.col = col;
		this.desc = desc;
		this.filterIn.value = filter;
		this.render();
	}

	private render(): void {
		const d = this.data;
		if (!d) return;
		const cols = this.diff ? [...COLS, ...DIFF_COLS] : COLS;
		this.head.replaceChildren(
			h(
				'tr',
				{},
				...cols.map((c) =>
					h(
						'th',
						{
							className: (c.num ? 'num ' : '') + (c.key === this.col ? 'sorted' : ''),
							testid: `th-${c.key}`,
							onclick: () => {
								if (this.col === c.key) this.desc = !this.desc;
								else {
									this.col = c.key;
									this.desc = c.num;
								}
								this.cb.onSort(this.col, this.desc);
								this.render();
							},
						},
						c.label + (c.key === this.col ? (this.desc ? ' ▼' : ' ▲') : ''),
					),
				),
			),
		);
		const total = d.total;
		const rows = sortRows(d.rows, total, this.col, this.desc, this.filterIn.value);
		this.countEl.textContent = `${rows.length} of ${d.rows.length} functions` + (rows.length > Table.MAX_ROWS ? ` (first ${Table.MAX_ROWS} shown)` : '');
		const u = d.unit;
		const frag = document.createDocumentFragment();
		for (const r of rows.slice(0, Table.MAX_ROWS)) {
			const tds = [
				h('td.fn', { title: r.file ? `${r.file}:${r.line} (${r.binary})` : r.binary }, r.name),
				h('td.num', {}, formatValue(r.flat, u)),
				h('td.num', {}, formatPercent(r.flat, total)),
				h('td.num', {}, formatValue(r.cum, u)),
				h('td.num', {}, formatPercent(r.cum, total)),
			];
			if (this.diff) {
				const df = r.diff_flat ?? 0;
				const dc = r.diff_cum ?? 0;
				tds.push(h('td.num', { className: 'num ' + (df > 0 ? 'worse' : df < 0 ? 'better' : '') }, formatSigned(df, u)));
				tds.push(h('td.num', { className: 'num ' + (dc > 0 ? 'worse' : dc < 0 ? 'better' : '') }, formatSigned(dc, u)));
			}
			frag.append(h('tr', { onclick: () => this.cb.onRow(r.name) }, ...tds));
		}
		if (!rows.length) {
			frag.append(h('tr', {}, h('td.empty', { colSpan: cols.length }, d.rows.length ? 'No function matches the filter — clear it or try a shorter text.' : 'No samples in this profile.')));
		}
		this.body.replaceChildren(frag);
	}
}
