// The metrics graph: total value per series over time (uPlot), a legend by
// series labels that highlights on hover, y axis in the profile's unit.
// Click a point → that single profile; drag-select a range → merge of it.

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Series } from './api';
import { formatTicks, formatY, toCores, type YMode } from './units';
import { alignSeries, legendLabels, seriesColor, seriesLabel } from './series';
export { seriesMatchers } from './series';

export interface GraphCallbacks {
	onPoint(time: number, series: Series): void;
	onRange(start: number, end: number): void;
}

let measureCtx: CanvasRenderingContext2D | null = null;
/** Pixel width of a tick label in uPlot's axis font. */
function textWidth(t: string): number {
	measureCtx ??= document.createElement('canvas').getContext('2d');
	if (!measureCtx) return t.length * 7;
	measureCtx.font = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", "Liberation Sans", Arial, sans-serif';
	return measureCtx.measureText(t).width;
}

export class MetricsGraph {
	readonly el: HTMLElement;
	private plotEl: HTMLElement;
	private legendEl: HTMLElement;
	private u: uPlot | null = null;
	private series: Series[] = [];
	private data: (number | null)[][] = [[]];
	private cb: GraphCallbacks;
	private selected: number | null = null;
	private ro: ResizeObserver;

	constructor(cb: GraphCallbacks) {
		this.cb = cb;
		this.el = document.createElement('div');
		this.el.className = 'metrics';
		this.plotEl = document.createElement('div');
		this.plotEl.className = 'metrics-plot';
		this.plotEl.setAttribute('data-testid', 'metrics-graph');
		this.legendEl = document.createElement('div');
		this.legendEl.className = 'metrics-legend';
		this.legendEl.setAttribute('data-testid', 'metrics-legend');
		this.el.append(this.plotEl, this.legendEl);
		this.ro = new ResizeObserver(() => {
			if (this.u) this.u.setSize({ width: this.plotWidth(), height: 200 });
		});
		this.ro.observe(this.el);
	}

	destroy(): void {
		this.ro.disconnect();
		this.u?.destroy();
	}

	private plotWidth(): number {
		return Math.max(300, this.el.clientWidth - 4);
	}

	/** Marks the selected single profile's time (a vertical line). */
	setSelected(time: number | null): void {
		this.selected = time;
		this.u?.redraw(false);
	}

	/** range: the query's [from, to] ms, which the x axis spans even where there is no data. */
	setData(series: Series[], unit: string, ymode: YMode, range?: [number, number]): void {
		this.series = series;
		const pts = series.map((s) => (ymode === 'raw' ? s.points : toCores(s.points)));
		const scaled = ymode === 'percent' ? pts.map((p) => p.map(([t, v]) => [t, v] as [number, number])) : pts;
		this.data = alignSeries(scaled);
		const labels = series.map(seriesLabel);
		const dark = document.documentElement.dataset.theme === 'dark';
		const axisStroke = dark ? '#c8c8c8' : '#333';
		const grid = dark ? '#2a2d33' : '#ececec';
		const opts: uPlot.Options = {
			width: this.plotWidth(),
			height: 200,
			ms: 1,
			legend: { show: false },
			focus: { alpha: 0.2 },
			cursor: {
				drag: { x: true, y: false, setScale: false },
				focus: { prox: 24 },
				points: { size: 9 },
			},
			scales: {
				x: {
					time: true,
					// Pad the data's extent so edge points can be clicked and dragged around.
					range: (_u, min, max) => {
						const pad = Math.max(1000, (max - min) * 0.04);
						return range ? [Math.min(range[0], min - pad), Math.max(range[1], max + pad)] : [min - pad, max + pad];
					},
				},
			},
			axes: [
				{ stroke: axisStroke, grid: { stroke: grid } },
				{
					stroke: axisStroke,
					grid: { stroke: grid },
					// Wide enough for the longest tick label ("0.010 cores", "512 MiB"): uPlot asks again when the labels change.
					size: (_u, values) => 18 + Math.ceil(Math.max(40, ...(values ?? []).map(textWidth))),
					values: (_u, splits) => formatTicks(splits, unit, ymode),
				},
			],
			series: [
				{},
				...labels.map((l, i) => ({
					label: l,
					stroke: seriesColor(i, l),
					width: 1.5,
					spanGaps: true,
					points: { show: true, size: 5 },
					value: (_u: uPlot, v: number | null) => (v == null ? '' : formatY(v, unit, ymode)),
				})),
			],
			hooks: {
				setSelect: [(u) => this.onSelect(u)],
				draw: [(u) => this.drawSelected(u)],
			},
		};
		this.u?.destroy();
		this.plotEl.replaceChildren();
		this.u = new uPlot(opts, this.data as uPlot.AlignedData, this.plotEl);
		this.installClick(this.u);
		this.renderLegend(labels, legendLabels(series));
	}

	private renderLegend(labels: string[], shown: string[]): void {
		this.legendEl.replaceChildren(
			...labels.map((l, i) => {
				const item = document.createElement('span');
				item.className = 'legend-item';
				item.title = l;
				const sw = document.createElement('i');
				sw.style.background = seriesColor(i, l);
				item.append(sw, shown[i]);
				item.addEventListener('mouseenter', () => {
					this.u?.setSeries(i + 1, { focus: true });
					this.legendEl.classList.add('focusing');
					item.classList.add('focused');
				});
				item.addEventListener('mouseleave', () => {
					this.u?.setSeries(null as unknown as number, { focus: true });
					this.legendEl.classList.remove('focusing');
					item.classList.remove('focused');
				});
				return item;
			}),
		);
	}

	private drawSelected(u: uPlot): void {
		if (this.selected == null) return;
		const x = u.valToPos(this.selected, 'x', true);
		const ctx = u.ctx;
		ctx.save();
		ctx.strokeStyle = '#e0457b';
		ctx.lineWidth = 2 * devicePixelRatio;
		ctx.beginPath();
		ctx.moveTo(x, u.bbox.top);
		ctx.lineTo(x, u.bbox.top + u.bbox.height);
		ctx.stroke();
		ctx.restore();
	}

	private onSelect(u: uPlot): void {
		if (u.select.width < 4) return;
		const a = u.posToVal(u.select.left, 'x');
		const b = u.posToVal(u.select.left + u.select.width, 'x');
		this.cb.onRange(Math.floor(a), Math.ceil(b));
	}

	/** The nearest plotted point to a position in the plot area (css px), within 30 px. */
	nearestPoint(left: number, top: number): { time: number; series: number; x: number; y: number } | null {
		const u = this.u;
		if (!u) return null;
		let best: { time: number; series: number; x: number; y: number } | null = null;
		let bestD = 30 * 30;
		const xs = this.data[0] as number[];
		for (let s = 1; s < this.data.length; s++) {
			const col = this.data[s];
			for (let i = 0; i < xs.length; i++) {
				const v = col[i];
				if (v == null) continue;
				const px = u.valToPos(xs[i], 'x');
				const py = u.valToPos(v, 'y');
				const d = (px - left) ** 2 + (py - top) ** 2;
				if (d < bestD) {
					bestD = d;
					best = { time: xs[i], series: s - 1, x: px, y: py };
				}
			}
		}
		return best;
	}

	/** Client coordinates of a series' point (for tests): series index, point index. */
	pointClient(series: number, idx: number): { x: number; y: number } | null {
		const u = this.u;
		if (!u) return null;
		const xs = this.data[0] as number[];
		const col = this.data[series + 1];
		let k = -1;
		for (let i = 0; i < xs.length; i++) {
			if (col[i] != null && ++k === idx) {
				const r = u.over.getBoundingClientRect();
				return { x: r.left + u.valToPos(xs[i], 'x'), y: r.top + u.valToPos(col[i]!, 'y') };
			}
		}
		return null;
	}

	private installClick(u: uPlot): void {
		let down: { x: number; y: number } | null = null;
		u.over.addEventListener('mousedown', (e) => {
			down = { x: e.clientX, y: e.clientY };
		});
		u.over.addEventListener('mouseup', (e) => {
			if (!down) return;
			const moved = Math.abs(e.clientX - down.x) + Math.abs(e.clientY - down.y);
			down = null;
			if (moved > 3) return;
			const r = u.over.getBoundingClientRect();
			const p = this.nearestPoint(e.clientX - r.left, e.clientY - r.top);
			if (p) this.cb.onPoint(p.time, this.series[p.series]);
		});
	}
}
