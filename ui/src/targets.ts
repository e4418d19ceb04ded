// The targets page: scrape targets grouped by job with health, labels, last
// scrape, duration and last error (/api/v1/targets, pull mode).

import { api, type Target } from './api';
import { h } from './dom';
import { formatAgo, formatDuration } from './units';

export function groupByJob(ts: Target[]): Map<string, Target[]> {
	const m = new Map<string, Target[]>();
	for (const t of [...ts].sort((a, b) => a.job.localeCompare(b.job) || a.url.localeCompare(b.url))) {
		if (!m.has(t.job)) m.set(t.job, []);
		m.get(t.job)!.push(t);
	}
	return m;
}

function labels(l: Record<string, string>): HTMLElement {
	return h('div.labels', {}, ...Object.keys(l).sort().map((k) => h('span.label-chip', {}, `${k}="${l[k]}"`)));
}

/**
 * Renders the page into root. A refresh (quiet) keeps the current content
 * until the answer is there, so the periodic update does not flicker.
 */
/** Matchers that select one target's series: its labels but the profile name and internal ones. */
export function targetMatchers(t: Target): string {
	return Object.keys(t.labels)
		.filter((k) => k !== '__name__' && !k.startsWith('__'))
		.sort()
		.map((k) => `${k}=${JSON.stringify(t.labels[k])}`)
		.join(', ');
}

export interface TargetsHooks {
	onRefresh?: () => void;
	/** Opens the profiles of a target (its profile name and matchers). */
	onOpen?: (profileName: string, matchers: string) => void;
}

export async function renderTargets(root: HTMLElement, quiet = false, hooks: TargetsHooks = {}): Promise<void> {
	const onRefresh = hooks.onRefresh;
	if (!quiet || !root.firstChild) root.replaceChildren(h('div.loading', {}, h('span.spinner'), ' Loading targets…'));
	let res;
	try {
		res = await api.targets();
	} catch (e) {
		root.replaceChildren(h('div.error-box', { testid: 'targets-error' }, 'Could not load targets: ' + (e as Error).message));
		return;
	}
	const now = Date.now();
	const active = res.active ?? [];
	const dropped = res.dropped ?? [];
	const nUp = active.filter((t) => t.health === 'up').length;
	const out: HTMLElement[] = [
		h(
			'div.targets-head',
			{},
			h('h2', {}, 'Targets'),
			h('span.targets-summary', { testid: 'targets-summary' }, active.length ? `${nUp} of ${active.length} up · updated ${new Date(now).toLocaleTimeString()} (every 5 s)` : ''),
			h('span.grow'),
			h('button', { testid: 'targets-refresh', onclick: () => (onRefresh ? onRefresh() : renderTargets(root, true, hooks)) }, 'Refresh'),
		),
	];
	if (!active.length) {
		out.push(h('div.empty-state', { testid: 'targets-empty' }, 'No scrape targets. Kiln scrapes pprof endpoints in pull mode: add a scrape_configs job to the config file (see docs) and start kiln with --config-path.'));
	}
	for (const [job, ts] of groupByJob(active)) {
		const up = ts.filter((t) => t.health === 'up').length;
		out.push(
			h(
				'section.job',
				{ testid: `job-${job}` },
				h('h3', {}, job, h('span.job-count', {}, ` ${up}/${ts.length} up`)),
				h(
					'table.targets',
					{},
					h('thead', {}, h('tr', {}, h('th', {}, 'Endpoint'), h('th', {}, 'Health'), h('th', {}, 'Labels'), h('th', {}, 'Last scrape'), h('th', {}, 'Duration'), h('th', {}, 'Last error'))),
					h(
						'tbody',
						{},
						...ts.map((t) =>
							h(
								'tr',
								{},
								h(
									'td.mono',
									{},
									t.url,
									t.health === 'up' && hooks.onOpen && t.labels.__name__
										? h('div', {}, h('a.open-profiles', { href: '#', testid: 'open-profiles', title: 'Show this target\'s profiles', onclick: (e: Event) => (e.preventDefault(), hooks.onOpen!(t.labels.__name__, targetMatchers(t))) }, 'profiles →'))
										: '',
								),
								h('td', {}, h(`span.health.${t.health === 'up' ? 'up' : t.health === 'down' ? 'down' : 'unknown'}`, { testid: 'health' }, t.health)),
								h('td', {}, labels(t.labels)),
								h('td', { title: t.last_scrape ? new Date(t.last_scrape).toISOString() : '' }, formatAgo(t.last_scrape, now)),
								h('td', {}, t.last_scrape ? formatDuration(t.last_scrape_duration_ms) : '—'),
								h('td.error-cell', {}, t.last_error || ''),
							),
						),
					),
				),
			),
		);
	}
	if (dropped.length) {
		out.push(h('details.dropped', {}, h('summary', {}, `${dropped.length} dropped target(s) (relabelled away)`), ...[...groupByJob(dropped)].map(([job, ts]) => h('div', {}, h('b', {}, job + ': '), ts.map((t) => t.url).join(', ')))));
	}
	root.replaceChildren(...out);
}
