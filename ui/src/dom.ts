// A tiny element builder: h('div.cls', {attrs}, children...).

type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
	spec: K | `${K}.${string}`,
	attrs: Record<string, unknown> = {},
	...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
	const [tag, ...classes] = spec.split('.');
	const el = document.createElement(tag as K);
	if (classes.length) el.className = classes.join(' ');
	for (const [k, v] of Object.entries(attrs)) {
		if (v === undefined || v === null || v === false) continue;
		if (k.startsWith('on') && typeof v === 'function') {
			el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
		} else if (k === 'testid') {
			el.setAttribute('data-testid', String(v));
		} else if (k in el && k !== 'list') {
			(el as unknown as Record<string, unknown>)[k] = v;
		} else {
			el.setAttribute(k, v === true ? '' : String(v));
		}
	}
	for (const c of children.flat()) {
		if (c === null || c === undefined || c === false) continue;
		el.append(c);
	}
	return el;
}

/** A loading overlay with a progress note after a few seconds. */
export class Loading {
	readonly el: HTMLElement;
	private timer = 0;
	private t0 = 0;
	constructor(what: string) {
		this.el = h('div.loading', { testid: 'loading', hidden: true }, h('span.spinner'), h('span.loading-text', {}, what));
	}
	start(what?: string): void {
		if (what) this.el.querySelector('.loading-text')!.textContent = what;
		this.el.hidden = false;
		this.t0 = performance.now();
		clearInterval(this.timer);
		this.timer = window.setInterval(() => {
			const s = Math.round((performance.now() - this.t0) / 1000);
			if (s >= 3) {
				let note = this.el.querySelector('.loading-note');
				if (!note) {
					note = h('span.loading-note', { testid: 'loading-note' });
					this.el.append(note);
				}
				note.textContent = ` still working (${s}s) — large ranges take longer; narrow the time range or add label matchers for a faster answer`;
			}
		}, 1000);
	}
	stop(): void {
		clearInterval(this.timer);
		this.el.hidden = true;
		this.el.querySelector('.loading-note')?.remove();
	}
}
