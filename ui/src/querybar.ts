// The query bar of one side: profile type, label matchers with autocomplete
// (names from /api/v1/labels, values from /api/v1/values), time range with
// presets and a custom range, Search; API errors are shown at the input
// with a caret under the reported position.

import { api, ApiError, type ProfileType } from './api';
import { applyCompletion, completionAt, rankSuggestions, type Completion } from './complete';
import { h } from './dom';
import { PRESETS, resolveRange, type Range, type Selection } from './state';

/** A profile type as a person reads it: "CPU time · parca_agent", "Memory in use (bytes) · memory". */
export function typeLabel(t: ProfileType): string {
	const known: Record<string, string> = {
		'samples/count/cpu': 'CPU samples',
		'cpu/nanoseconds/cpu': 'CPU time',
		'samples/count/wallclock': 'Off-CPU samples',
		'wallclock/nanoseconds/': 'Off-CPU time',
		'alloc_objects/count/space': 'Allocations (objects)',
		'alloc_space/bytes/space': 'Allocations (bytes)',
		'inuse_objects/count/space': 'Memory in use (objects)',
		'inuse_space/bytes/space': 'Memory in use (bytes)',
		'goroutine/count/goroutine': 'Goroutines',
		'contentions/count/contentions': 'Contentions',
		'delay/nanoseconds/contentions': 'Contention delay',
	};
	const what = known[`${t.sample_type}/${t.sample_unit}/${t.period_type}`] ?? known[`${t.sample_type}/${t.sample_unit}/`] ?? `${t.sample_type} (${t.sample_unit})`;
	return `${what} · ${t.name}`;
}

function toLocalInput(ms: number): string {
	const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
	return d.toISOString().slice(0, 16);
}

export class QueryBar {
	readonly el: HTMLElement;
	private typeSel: HTMLSelectElement;
	private input: HTMLInputElement;
	private menu: HTMLElement;
	private rangeSel: HTMLSelectElement;
	private fromIn: HTMLInputElement;
	private toIn: HTMLInputElement;
	private errEl: HTMLElement;
	private comp: Completion = { kind: 'none' };
	private items: string[] = [];
	private active = 0;
	private reqId = 0;
	private cache = new Map<string, string[]>(); // label names / values, until the next Search
	private types: ProfileType[] = [];
	private onSearch: () => void;
	private side: string;

	constructor(side: string, onSearch: () => void) {
		this.side = side;
		this.onSearch = onSearch;
		this.typeSel = h('select.type-select', { testid: `type-select-${side}`, title: 'Profile type' });
		this.input = h('input.matchers', {
			testid: `matchers-${side}`,
			placeholder: 'label matchers, e.g. job="api", node=~"web-.*"',
			spellcheck: false,
			autocomplete: 'off',
		});
		this.menu = h('ul.autocomplete', { testid: `autocomplete-${side}`, hidden: true });
		this.rangeSel = h(
			'select.range-select',
			{ testid: `range-select-${side}`, title: 'Time range' },
			...PRESETS.map((p) => h('option', { value: p.key }, p.label)),
			h('option', { value: 'custom' }, 'Custom range…'),
		);
		this.fromIn = h('input.range-input', { type: 'datetime-local', testid: `range-from-${side}`, hidden: true });
		this.toIn = h('input.range-input', { type: 'datetime-local', testid: `range-to-${side}`, hidden: true });
		this.errEl = h('div.query-error', { testid: `query-error-${side}`, hidden: true });
		const search = h('button.primary', { testid: `search-${side}`, onclick: () => this.submit() }, 'Search');
		this.rangeSel.addEventListener('change', () => {
			const custom = this.rangeSel.value === 'custom';
			this.fromIn.hidden = this.toIn.hidden = !custom;
			if (custom && !this.fromIn.value) {
				const [a, b] = resolveRange({ preset: '1h' }, Date.now());
				this.fromIn.value = toLocalInput(a);
				this.toIn.value = toLocalInput(b);
			}
		});
		this.typeSel.addEventListener('change', () => {
			this.clearError();
			this.cache.clear();
		});
		this.input.addEventListener('input', () => {
			this.clearError();
			this.refreshCompletion();
		});
		this.input.addEventListener('click', () => this.refreshCompletion());
		this.input.addEventListener('focus', () => this.refreshCompletion());
		this.input.addEventListener('blur', () => setTimeout(() => this.closeMenu(), 150));
		this.input.addEventListener('keydown', (e) => this.onKey(e));
		this.el = h(
			'div.querybar',
			{ testid: `querybar-${side}` },
			h('div.querybar-row', {}, this.typeSel, h('div.matcher-wrap', {}, h('span.brace', {}, '{'), this.input, h('span.brace', {}, '}'), this.menu), this.rangeSel, this.fromIn, this.toIn, search),
			this.errEl,
		);
	}

	setTypes(types: ProfileType[], selected: string): void {
		this.types = types;
		const opts = [h('option', { value: '' }, types.length ? 'Select profile type…' : 'No profile types yet')];
		for (const t of types) opts.push(h('option', { value: t.key, title: t.key }, typeLabel(t)));
		if (selected && !types.some((t) => t.key === selected)) opts.push(h('option', { value: selected }, selected));
		this.typeSel.replaceChildren(...opts);
		this.typeSel.value = selected;
	}

	profileType(): ProfileType | undefined {
		return this.types.find((t) => t.key === this.typeSel.value);
	}

	/** Fills the inputs from a selection (URL or the other side). */
	load(sel: Selection): void {
		if (sel.type && ![...this.typeSel.options].some((o) => o.value === sel.type)) {
			this.typeSel.append(h('option', { value: sel.type }, sel.type));
		}
		this.typeSel.value = sel.type;
		this.input.value = sel.matchers;
		if (sel.range.from !== undefined && sel.range.to !== undefined) {
			this.rangeSel.value = 'custom';
			this.fromIn.value = toLocalInput(sel.range.from);
			this.toIn.value = toLocalInput(sel.range.to);
			this.fromIn.hidden = this.toIn.hidden = false;
		} else {
			this.rangeSel.value = sel.range.preset ?? '1h';
			this.fromIn.hidden = this.toIn.hidden = true;
		}
	}

	type(): string {
		return this.typeSel.value;
	}

	matchers(): string {
		return this.input.value.trim();
	}

	range(): Range {
		if (this.rangeSel.value === 'custom') {
			const a = new Date(this.fromIn.value).getTime();
			const b = new Date(this.toIn.value).getTime();
			if (Number.isFinite(a) && Number.isFinite(b) && a < b) return { from: a, to: b };
			return { preset: '1h' };
		}
		return { preset: this.rangeSel.value };
	}

	focusInput(): void {
		this.input.focus();
	}

	submit(): void {
		this.closeMenu();
		this.cache.clear();
		if (!this.typeSel.value) {
			this.showError(new ApiError('select a profile type first', 400));
			return;
		}
		if (this.rangeSel.value === 'custom') {
			const a = new Date(this.fromIn.value).getTime();
			const b = new Date(this.toIn.value).getTime();
			if (!Number.isFinite(a) || !Number.isFinite(b)) {
				this.showError(new ApiError('custom range: fill in both the start and the end date and time', 400));
				return;
			}
			if (a >= b) {
				this.showError(new ApiError('custom range: the start must be before the end', 400));
				return;
			}
		}
		this.onSearch();
	}

	clearError(): void {
		this.errEl.hidden = true;
		this.input.classList.remove('invalid');
	}

	/** Shows an API error; a parse error's position (in TYPE{matchers}) is marked. */
	showError(e: Error): void {
		this.errEl.replaceChildren();
		this.errEl.hidden = false;
		const pos = e instanceof ApiError ? e.position : undefined;
		// The server's message may carry its own caret lines; the first line says what, the caret below says where.
		this.errEl.append(h('div.query-error-msg', {}, pos !== undefined ? e.message.split('\n')[0] : e.message));
		if (pos !== undefined) {
			const q = this.typeSel.value + '{' + this.matchers() + '}';
			const p = Math.max(0, Math.min(pos, q.length));
			this.errEl.append(h('pre.query-error-at', { testid: `query-error-at-${this.side}` }, q + '\n' + ' '.repeat(p) + '^ here (position ' + p + ')'));
			const inMatchers = p - (this.typeSel.value.length + 1);
			if (inMatchers >= 0) {
				this.input.classList.add('invalid');
				this.input.focus();
				this.input.setSelectionRange(inMatchers, Math.min(inMatchers + 1, this.input.value.length));
			}
		}
	}

	private closeMenu(): void {
		this.menu.hidden = true;
		this.items = [];
	}

	private async refreshCompletion(): Promise<void> {
		const c = completionAt(this.input.value, this.input.selectionStart ?? this.input.value.length);
		this.comp = c;
		if (c.kind === 'none' || !this.typeSel.value) {
			this.closeMenu();
			return;
		}
		const key = `${c.kind}\u0000${c.kind === 'value' ? c.label : ''}\u0000${this.typeSel.value}`;
		const cached = this.cache.get(key);
		if (cached) {
			this.items = rankSuggestions(cached, c.prefix);
			this.active = 0;
			this.renderMenu();
			return;
		}
		this.closeMenu(); // nothing stale may be chosen while the answer is on its way
		const id = ++this.reqId;
		const [start, end] = resolveRange(this.range(), Date.now());
		try {
			let all: string[];
			if (c.kind === 'name') {
				all = (await api.labels(this.typeSel.value, start, end)).names.filter((n) => n !== '__name__');
			} else {
				all = (await api.values(c.label, this.typeSel.value, start, end)).values;
			}
			this.cache.set(key, all);
			if (id !== this.reqId || document.activeElement !== this.input) return;
			this.refreshCompletion();
		} catch {
			this.closeMenu(); // suggestions are a convenience: Search reports errors
		}
	}

	private renderMenu(): void {
		if (!this.items.length) {
			this.menu.hidden = true;
			return;
		}
		const kind = this.comp.kind === 'name' ? 'label' : 'value';
		this.menu.replaceChildren(
			...this.items.map((s, i) =>
				h(
					'li',
					{
						className: i === this.active ? 'active' : '',
						onmousedown: (e: Event) => {
							e.preventDefault();
							this.choose(s);
						},
					},
					h('span.ac-kind', {}, kind),
					s,
				),
			),
		);
		this.menu.hidden = false;
	}

	private choose(s: string): void {
		const r = applyCompletion(this.input.value, this.comp, s);
		this.input.value = r.text;
		this.input.setSelectionRange(r.cursor, r.cursor);
		this.closeMenu();
		this.input.focus();
		this.refreshCompletion();
	}

	private onKey(e: KeyboardEvent): void {
		if (!this.menu.hidden && this.items.length) {
			if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
				e.preventDefault();
				this.active = (this.active + (e.key === 'ArrowDown' ? 1 : this.items.length - 1)) % this.items.length;
				this.renderMenu();
				return;
			}
			if (e.key === 'Tab' || (e.key === 'Enter' && !e.ctrlKey)) {
				e.preventDefault();
				this.choose(this.items[this.active]);
				return;
			}
			if (e.key === 'Escape') {
				e.stopPropagation();
				this.closeMenu();
				return;
			}
		}
		if (e.key === 'Enter') {
			e.preventDefault();
			this.submit();
		}
	}
}
