// The icicle graph on a canvas. The layout (x, end) is computed once per
// profile (flame.ts); a frame walks the pre-order arrays from the root and
// skips every subtree that is outside the window or narrower than 1 px, so
// the cost of a frame is bounded by what is visible, not by the tree size.
// Zoom animates the value window; ancestors of the focus span the full width.
// Drag or a horizontal wheel pans the window, Ctrl/⌘ + wheel zooms around
// the pointer; both keep the focus (Esc / Reset zoom go back to the root).

import { binaryColor, packageOf, diffBucket, diffBucketColor, relativeChange, DIFF_STEPS } from './colors';
import { type Flame, type Window, nodeAt, pathOf, searchMask, matchedValue } from './flame';
import { formatPercent, formatSigned, formatValue } from './units';

export const ROW = 18;

export interface IcicleCallbacks {
	onFocus(path: string[], node: number): void;
	/** The window was panned or wheel-zoomed (the focus is unchanged). */
	onPan?(): void;
	/** Right click on a frame (the sandwich view of its function). */
	onContext?(name: string): void;
}

export interface PerfLog {
	paints: { nodes: number; ms: number }[];
	frames: number[];
}

declare global {
	interface Window {
		__kilnPerf?: PerfLog;
	}
}

function perf(): PerfLog {
	if (!window.__kilnPerf) window.__kilnPerf = { paints: [], frames: [] };
	return window.__kilnPerf;
}

/** True when every frame (but the root) comes from one binary. */
export function singleBinary(f: Flame): boolean {
	for (let i = 2; i < f.n; i++) if (f.binary[i] !== f.binary[1]) return false;
	return true;
}

export class Icicle {
	readonly el: HTMLElement;
	private canvas: HTMLCanvasElement;
	private ctx: CanvasRenderingContext2D;
	private tip: HTMLElement;
	private f: Flame | null = null;
	private win: Window = { x0: 0, w: 1 };
	private focus = 0;
	private hover = -1;
	private mask: Uint8Array | null = null;
	private dark = false;
	private widthPx = 0;
	private charW = 7;
	private anim = 0;
	private pending = 0;
	private dragged = false; // the last mousedown panned: swallow its click
	private binColors = new Map<number, string>();
	private byPackage = false; // one binary: colour by the function's package instead
	private diffColors = new Map<number, string>();
	private cb: IcicleCallbacks;

	/** testid: prefix of the canvas's and tooltip's data-testid (a second graph needs its own). */
	constructor(cb: IcicleCallbacks, testid = 'icicle') {
		this.cb = cb;
		this.el = document.createElement('div');
		this.el.className = 'icicle';
		this.canvas = document.createElement('canvas');
		this.canvas.setAttribute('data-testid', `${testid}-canvas`);
		this.el.appendChild(this.canvas);
		this.tip = document.createElement('div');
		this.tip.className = 'tooltip';
		this.tip.setAttribute('data-testid', `${testid}-tooltip`);
		this.tip.hidden = true;
		document.body.appendChild(this.tip);
		this.ctx = this.canvas.getContext('2d', { alpha: false })!;
		this.canvas.addEventListener('mousemove', (e) => this.onMove(e));
		this.canvas.addEventListener('mouseleave', () => {
			this.hover = -1;
			this.tip.hidden = true;
			this.schedule();
		});
		this.canvas.addEventListener('click', (e) => this.onClick(e));
		this.canvas.addEventListener('contextmenu', (e) => {
			const i = this.nodeAtEvent(e);
			if (i <= 0 || !this.cb.onContext) return;
			e.preventDefault();
			this.cb.onContext(this.f!.strings[this.f!.name[i]]);
		});
		this.canvas.addEventListener('mousedown', (e) => this.onDown(e));
		this.canvas.addEventListener('wheel', (e) => this.onWheel(e), { passive: false });
		new ResizeObserver(() => this.resize()).observe(this.el);
	}

	destroy(): void {
		this.tip.remove();
		cancelAnimationFrame(this.anim);
		cancelAnimationFrame(this.pending);
	}

	get flame(): Flame | null {
		return this.f;
	}

	get focusNode(): number {
		return this.focus;
	}

	setTheme(dark: boolean): void {
		this.dark = dark;
		this.binColors.clear();
		this.diffColors.clear();
		this.schedule();
	}

	setData(f: Flame, focus: number): void {
		this.f = f;
		this.binColors.clear();
		this.byPackage = singleBinary(f);
		this.focus = focus > 0 && focus < f.n ? focus : 0;
		this.win = { x0: f.x[this.focus], w: f.cum[this.focus] || 1 };
		this.hover = -1;
		this.resize(true);
		const t0 = performance.now();
		const nodes = this.draw();
		perf().paints.push({ nodes: f.n, ms: performance.now() - t0 });
		this.canvas.dataset.nodes = String(f.n);
		this.canvas.dataset.drawn = String(nodes);
		this.canvas.dataset.painted = String(Date.now());
	}

	/** Highlights frames whose name contains text; returns their share of the total. */
	setSearch(text: string): number {
		if (!this.f) return 0;
		this.mask = searchMask(this.f, text);
		this.schedule();
		return this.mask ? matchedValue(this.f, this.mask) : 0;
	}

	zoomTo(node: number, animate = true): void {
		const f = this.f;
		if (!f) return;
		if (node < 0 || node >= f.n) node = 0;
		this.focus = node;
		const target = { x0: f.x[node], w: f.cum[node] || 1 };
		this.cb.onFocus(pathOf(f, node), node);
		cancelAnimationFrame(this.anim);
		if (!animate) {
			this.anim = 0;
			this.win = target;
			this.schedule();
			return;
		}
		const from = { ...this.win };
		const t0 = performance.now();
		const dur = 220;
		const step = (now: number) => {
			const t = Math.min(1, (now - t0) / dur);
			const e = 1 - Math.pow(1 - t, 3);
			this.win = t >= 1 ? target : { x0: from.x0 + (target.x0 - from.x0) * e, w: from.w + (target.w - from.w) * e };
			const s = performance.now();
			this.draw();
			perf().frames.push(performance.now() - s);
			if (t < 1) this.anim = requestAnimationFrame(step);
			else this.anim = 0;
		};
		this.anim = requestAnimationFrame(step);
	}

	/** True when no zoom animation runs and no draw is pending (tests wait for it). */
	get idle(): boolean {
		return this.anim === 0 && this.pending === 0;
	}

	reset(): void {
		this.zoomTo(0);
	}

	resize(quiet = false): void {
		const f = this.f;
		const dpr = window.devicePixelRatio || 1;
		const w = Math.max(100, this.el.clientWidth);
		const rows = f ? f.height + 1 : 1;
		const h = Math.min(rows * ROW, 30000);
		this.widthPx = w;
		this.canvas.style.width = w + 'px';
		this.canvas.style.height = h + 'px';
		if (this.canvas.width !== Math.round(w * dpr) || this.canvas.height !== Math.round(h * dpr)) {
			this.canvas.width = Math.round(w * dpr);
			this.canvas.height = Math.round(h * dpr);
		}
		this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
		this.ctx.font = '12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';
		this.charW = this.ctx.measureText('mmmmmmmmmm').width / 10 || 7;
		if (!quiet) this.schedule();
	}

	private schedule(): void {
		if (this.pending) return;
		this.pending = requestAnimationFrame(() => {
			this.pending = 0;
			this.draw();
		});
	}

	private color(i: number): string {
		const f = this.f!;
		if (f.diff) {
			const b = diffBucket(f.cum[i], f.diff[i]);
			let c = this.diffColors.get(b);
			if (!c) {
				c = diffBucketColor(b, this.dark);
				this.diffColors.set(b, c);
			}
			return c;
		}
		const key = this.byPackage ? f.name[i] : f.binary[i];
		let c = this.binColors.get(key);
		if (!c) {
			c = binaryColor(this.byPackage ? packageOf(f.strings[key]) || f.strings[f.binary[i]] : f.strings[key], this.dark);
			this.binColors.set(key, c);
		}
		return c;
	}

	/** Paints the current window; returns the number of rectangles drawn. */
	draw(): number {
		const ctx = this.ctx;
		const f = this.f;
		const W = this.widthPx;
		const H = this.canvas.height / (window.devicePixelRatio || 1);
		ctx.fillStyle = this.dark ? '#16181d' : '#ffffff';
		ctx.fillRect(0, 0, W, H);
		if (!f || f.n === 0) return 0;
		const { x0, w } = this.win;
		const x1 = x0 + w;
		const scale = W / w;
		const maxDepth = Math.floor(H / ROW);
		const textColor = this.dark ? '#f2f2f2' : '#1b1b1b';
		const dim = this.dark ? '#2c2f36' : '#e4e4e7';
		const mask = this.mask;
		const cw = this.charW;
		let drawn = 0;
		ctx.textBaseline = 'middle';
		for (let i = 0; i < f.n; ) {
			const l = f.x[i];
			const r = l + f.cum[i];
			const d = f.depth[i];
			if (r <= x0 || l >= x1 || d > maxDepth) {
				i = f.end[i];
				continue;
			}
			const px = Math.max(0, (l - x0) * scale);
			const pr = Math.min(W, (r - x0) * scale);
			const pw = pr - px;
			if (pw < 1) {
				i = f.end[i];
				continue;
			}
			const y = d * ROW;
			ctx.fillStyle = mask && !mask[i] ? dim : this.color(i);
			ctx.fillRect(px, y, pw > 2 ? pw - 0.5 : pw, ROW - 1);
			drawn++;
			if (pw > cw * 3 + 6) {
				const name = f.strings[f.name[i]];
				const max = Math.floor((pw - 6) / cw);
				const label = name.length > max ? name.slice(0, Math.max(1, max - 1)) + '…' : name;
				ctx.fillStyle = mask && !mask[i] ? (this.dark ? '#777' : '#999') : textColor;
				ctx.fillText(label, px + 3, y + ROW / 2);
			}
			i++;
		}
		if (this.hover >= 0 && this.hover < f.n) {
			const i = this.hover;
			const px = Math.max(0, (f.x[i] - x0) * scale);
			const pr = Math.min(W, (f.x[i] + f.cum[i] - x0) * scale);
			ctx.strokeStyle = this.dark ? '#ffffff' : '#000000';
			ctx.lineWidth = 1.5;
			ctx.strokeRect(px + 0.75, f.depth[i] * ROW + 0.75, Math.max(1, pr - px - 1.5), ROW - 2.5);
		}
		return drawn;
	}

	private nodeAtEvent(e: MouseEvent): number {
		const f = this.f;
		if (!f) return -1;
		const rect = this.canvas.getBoundingClientRect();
		const mx = e.clientX - rect.left;
		const my = e.clientY - rect.top;
		const vx = this.win.x0 + (mx / this.widthPx) * this.win.w;
		return nodeAt(f, vx, Math.floor(my / ROW));
	}

	private onMove(e: MouseEvent): void {
		const i = this.nodeAtEvent(e);
		if (i !== this.hover) {
			this.hover = i;
			this.schedule();
		}
		if (i < 0) {
			this.tip.hidden = true;
			return;
		}
		this.tip.replaceChildren(...this.tooltipLines(i));
		this.tip.hidden = false;
		const pad = 14;
		let x = e.clientX + pad;
		let y = e.clientY + pad;
		const tw = this.tip.offsetWidth;
		const th = this.tip.offsetHeight;
		if (x + tw > window.innerWidth - 4) x = e.clientX - tw - pad;
		if (y + th > window.innerHeight - 4) y = e.clientY - th - pad;
		this.tip.style.left = Math.max(4, x) + 'px';
		this.tip.style.top = Math.max(4, y) + 'px';
	}

	tooltipLines(i: number): HTMLElement[] {
		const f = this.f!;
		const s = f.strings;
		const total = f.cum[0] || f.total;
		const row = (k: string, v: string) => {
			const d = document.createElement('div');
			const b = document.createElement('b');
			b.textContent = k;
			d.append(b, ' ' + v);
			return d;
		};
		const title = document.createElement('div');
		title.className = 'tip-title';
		title.textContent = s[f.name[i]];
		const out = [title];
		const file = s[f.file[i]];
		if (file) out.push(row('file', f.line[i] > 0 ? `${file}:${f.line[i]}` : file));
		out.push(row('binary', s[f.binary[i]] || '(unknown)'));
		out.push(row('self', `${formatValue(f.self[i], f.unit)} (${formatPercent(f.self[i], total)})`));
		out.push(row('total', `${formatValue(f.cum[i], f.unit)} (${formatPercent(f.cum[i], total)})`));
		if (f.diff) {
			const d = f.diff[i];
			const r = relativeChange(f.cum[i], d);
			const pct = Number.isFinite(r) ? (r > 0 ? '+' : '') + (100 * r).toFixed(1) + '%' : 'new';
			out.push(row('A (base)', formatValue(f.cum[i] - d, f.unit)));
			out.push(row('B', formatValue(f.cum[i], f.unit)));
			out.push(row('diff', `${formatSigned(d, f.unit)} (${pct})`));
		}
		return out;
	}

	/** The visible value window (tests read it). */
	get view(): Window {
		return { ...this.win };
	}

	/**
	 * Moves/scales the window without changing the focus (pan and wheel
	 * zoom): clamped to the profile, at most one frame per animation frame,
	 * each frame's draw time logged like the zoom animation's.
	 */
	private setWindow(x0: number, w: number): void {
		const f = this.f;
		if (!f) return;
		const total = f.cum[0] || 1;
		w = Math.min(total, Math.max(w, total * 1e-7, 1e-9));
		x0 = Math.min(Math.max(0, x0), total - w);
		cancelAnimationFrame(this.anim);
		this.anim = 0;
		this.win = { x0, w };
		this.cb.onPan?.();
		if (this.pending) return;
		this.pending = requestAnimationFrame(() => {
			this.pending = 0;
			const t = performance.now();
			this.draw();
			perf().frames.push(performance.now() - t);
		});
	}

	/** Ctrl/⌘ + wheel (or a pinch) zooms around the pointer; a horizontal wheel or Shift + wheel pans. */
	private onWheel(e: WheelEvent): void {
		if (!this.f) return;
		const rect = this.canvas.getBoundingClientRect();
		const fx = Math.min(1, Math.max(0, (e.clientX - rect.left) / this.widthPx));
		const px = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? this.widthPx : 1; // lines/pages to pixels
		if (e.ctrlKey || e.metaKey) {
			e.preventDefault();
			const vx = this.win.x0 + fx * this.win.w;
			const w = this.win.w * Math.exp(Math.max(-200, Math.min(200, e.deltaY * px)) * 0.002);
			this.setWindow(vx - fx * w, w);
		} else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
			e.preventDefault();
			const d = (e.shiftKey && !e.deltaX ? e.deltaY : e.deltaX) * px;
			this.setWindow(this.win.x0 + (d / this.widthPx) * this.win.w, this.win.w);
		}
	}

	/** Dragging pans horizontally; a drag does not count as a click. */
	private onDown(e: MouseEvent): void {
		if (e.button !== 0 || !this.f) return;
		const sx = e.clientX;
		const x0 = this.win.x0;
		let moved = false;
		const move = (m: MouseEvent) => {
			const dx = m.clientX - sx;
			if (!moved && Math.abs(dx) < 4) return;
			moved = true;
			this.dragged = true;
			this.canvas.style.cursor = 'grabbing';
			this.tip.hidden = true;
			this.setWindow(x0 - (dx / this.widthPx) * this.win.w, this.win.w);
		};
		const up = () => {
			window.removeEventListener('mousemove', move);
			window.removeEventListener('mouseup', up);
			this.canvas.style.cursor = '';
			setTimeout(() => (this.dragged = false), 0); // after the click that may follow this mouseup
		};
		window.addEventListener('mousemove', move);
		window.addEventListener('mouseup', up);
	}

	private onClick(e: MouseEvent): void {
		if (this.dragged) {
			this.dragged = false;
			return;
		}
		const i = this.nodeAtEvent(e);
		if (i < 0) return;
		this.zoomTo(i === this.focus ? Math.max(0, this.f!.parent[i]) : i);
	}

	/** Test/bench hook: the centre of node i in client coordinates, if visible. */
	nodeCenter(i: number): { x: number; y: number } | null {
		const f = this.f;
		if (!f) return null;
		const rect = this.canvas.getBoundingClientRect();
		const scale = this.widthPx / this.win.w;
		const l = Math.max(0, (f.x[i] - this.win.x0) * scale);
		const r = Math.min(this.widthPx, (f.x[i] + f.cum[i] - this.win.x0) * scale);
		if (r - l < 1) return null;
		return { x: rect.left + (l + r) / 2, y: rect.top + f.depth[i] * ROW + ROW / 2 };
	}
}

export { DIFF_STEPS };
