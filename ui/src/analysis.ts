// The analysis tools beside the flame graph: pprof's frame filters (applied
// by the server, docs/API.md), the sandwich view's header, and the compare
// view's ranked table of the deploy-regression report.

import type { RegressionResult } from './api';
import { h } from './dom';
import { FRAME_FILTERS, noFrameFilters, type FrameFilters } from './state';

/** Four pattern inputs and Apply / Clear; Enter in any input applies. */
export class FrameFilterBar {
	readonly el: HTMLElement;
	private inputs = new Map<keyof FrameFilters, HTMLInputElement>();

	constructor(onApply: (f: FrameFilters) => void) {
		const apply = () => onApply(this.value());
		const fields = FRAME_FILTERS.map((f) => {
			const input = h('input.frame-filter', { testid: `frame-filter-${f.key}`, type: 'text', placeholder: 'regexp', title: f.title, spellcheck: false });
			input.addEventListener('keydown', (e) => e.key === 'Enter' && apply());
			this.inputs.set(f.key, input);
			return h('label.frame-filter-field', { title: f.title }, f.label, input);
		});
		const clear = () => {
			this.load(noFrameFilters());
			apply();
		};
		this.el = h(
			'div.frame-filters',
			{ testid: 'frame-filters' },
			...fields,
			h('button', { testid: 'frame-filters-apply', onclick: apply }, 'Apply'),
			h('button.ghost', { testid: 'frame-filters-clear', onclick: clear }, 'Clear'),
		);
	}

	load(f: FrameFilters): void {
		for (const [k, input] of this.inputs) input.value = f[k];
	}

	value(): FrameFilters {
		const f = noFrameFilters();
		for (const [k, input] of this.inputs) f[k] = input.value.trim();
		return f;
	}
}

const VERDICT_LABEL: Record<string, string> = {
	regression: 'slower',
	improvement: 'faster',
	unchanged: 'unchanged',
	not_enough_data: 'not enough data',
};

const pct = (v: number) => (100 * v).toFixed(2) + '%';
const pts = (v: number) => (v > 0 ? '+' : v < 0 ? '−' : '±') + Math.abs(v).toFixed(2);

/** The regression report as a table: regressions first; a row click focuses the function. */
export class RegressionPanel {
	readonly el: HTMLElement;
	private status: HTMLElement;
	private body: HTMLElement;

	constructor(private onRow: (name: string) => void) {
		this.status = h('div.regression-status', { testid: 'regression-status' });
		this.body = h('tbody');
		const head = h(
			'tr',
			{},
			...['', 'function', 'total A', 'total B', 'change (points)', 'self A', 'self B', 'q', 'effect'].map((c) => h('th', {}, c)),
		);
		this.el = h(
			'section.regression',
			{ testid: 'regression', hidden: true },
			h('h3', {}, 'What changed, B against A'),
			this.status,
			h('table.regression-table', { testid: 'regression-table' }, h('thead', {}, head), this.body),
		);
	}

	hide(): void {
		this.el.hidden = true;
		this.body.replaceChildren();
	}

	loading(): void {
		this.el.hidden = false;
		this.status.textContent = 'Testing every function over the windows of each side…';
		this.body.replaceChildren();
	}

	error(msg: string): void {
		this.el.hidden = false;
		this.status.textContent = 'Regression report failed: ' + msg;
		this.body.replaceChildren();
	}

	set(r: RegressionResult): void {
		this.el.hidden = false;
		const found = r.rows.filter((x) => x.verdict === 'regression').length;
		const thin = r.rows.length > 0 && r.rows[0].verdict === 'not_enough_data';
		this.status.textContent = thin
			? `Not enough data: ${r.a_windows} windows with samples in A, ${r.b_windows} in B; each side needs 5 — widen the ranges.`
			: `${found} function${found === 1 ? '' : 's'} slower with confidence (q ≤ ${r.alpha}, change ≥ ${r.threshold_pp} points) · ${r.a_windows} windows in A, ${r.b_windows} in B · ${r.test}`;
		const rows = r.rows.filter((x) => x.verdict !== 'unchanged' || Math.abs(x.delta_total_pp) >= 0.1).slice(0, 50);
		this.body.replaceChildren(
			...rows.map((x) =>
				h(
					'tr',
					{ testid: 'regression-row', className: 'verdict-' + x.verdict, title: `p = ${x.p.toPrecision(2)}; click to find it in the flame graph`, onclick: () => this.onRow(x.name) },
					h('td.verdict', {}, VERDICT_LABEL[x.verdict] ?? x.verdict),
					h('td.name', {}, x.name),
					h('td.num', {}, pct(x.a_total_share)),
					h('td.num', {}, pct(x.b_total_share)),
					h('td.num', {}, pts(x.delta_total_pp)),
					h('td.num', {}, pct(x.a_self_share)),
					h('td.num', {}, pct(x.b_self_share)),
					h('td.num', {}, x.q.toPrecision(2)),
					h('td.num', {}, x.effect.toFixed(2)),
				),
			),
		);
	}
}
