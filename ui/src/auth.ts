// Bearer tokens, for a server that requires them (docs/SECURITY.md). The
// first API answer 401 opens a small form; the token entered is kept in
// sessionStorage (this tab, until it closes) and sent as
// `Authorization: Bearer` on every API call. A token the server refuses
// (401 again) opens the form again with the server's reason; a token with
// the wrong role (403) is an ordinary error.

import { h } from './dom';

const KEY = 'kiln.token';

/** When sessionStorage is unavailable (private modes), the token lives here. */
let memoryToken: string | null = null;

export function savedToken(): string | null {
	try {
		return sessionStorage.getItem(KEY) ?? memoryToken;
	} catch {
		return memoryToken;
	}
}

let pending: Promise<void> | null = null;

/**
 * Shows the token form (once, however many calls wait for it) with why the
 * server refused; resolves once a token is saved, and the callers retry.
 */
export function askToken(why: string): Promise<void> {
	if (pending) return pending;
	pending = new Promise<void>((resolve) => {
		const input = h('input.auth-input', {
			testid: 'auth-token',
			type: 'password',
			autocomplete: 'off',
			placeholder: 'token',
			required: true,
		});
		const form = h(
			'form.auth-form',
			{ testid: 'auth-form' },
			h('h2', {}, 'This Kiln server requires a token'),
			h('p.auth-why', { testid: 'auth-why' }, why),
			h('p.auth-note', {}, 'Paste a token with the read role. It is kept for this tab only.'),
			input,
			h('button', { testid: 'auth-submit', type: 'submit' }, 'Use token'),
		);
		const overlay = h('div.auth-overlay', { testid: 'auth-overlay' }, form);
		form.addEventListener('submit', (e) => {
			e.preventDefault();
			const t = input.value.trim();
			if (!t) return;
			try {
				sessionStorage.setItem(KEY, t);
			} catch {
				/* storage off: the token lives only as long as this page */
				memoryToken = t;
			}
			overlay.remove();
			pending = null;
			resolve();
		});
		document.body.append(overlay);
		input.focus();
	});
	return pending;
}

/** fetch() with the saved token; on 401 asks for one and tries again. */
export async function authFetch(url: string, init: RequestInit = {}): Promise<Response> {
	for (;;) {
		const t = savedToken();
		const headers = { ...(init.headers as Record<string, string>), ...(t ? { Authorization: 'Bearer ' + t } : {}) };
		const res = await fetch(url, { ...init, headers });
		if (res.status !== 401) return res;
		let why = 'The server answered 401 Unauthorized.';
		try {
			const j = JSON.parse(await res.text());
			if (j && typeof j.error === 'string') why = j.error;
		} catch {
			/* not the JSON error: keep the generic reason */
		}
		await askToken(why);
	}
}

/** A download link that works when the server needs a token: fetched with it, saved from a blob. */
export async function downloadWithToken(url: string, filename: string): Promise<void> {
	const res = await authFetch(url);
	if (!res.ok) throw new Error(`HTTP ${res.status}`);
	const blob = await res.blob();
	const href = URL.createObjectURL(blob);
	const a = h('a', { href, download: filename });
	document.body.append(a);
	a.click();
	a.remove();
	setTimeout(() => URL.revokeObjectURL(href), 10000);
}
