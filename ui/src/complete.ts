// Autocomplete for the label-matcher input (`comm="x", node=~"web-.*"`):
// what the cursor is on, and how to insert a chosen suggestion. Pure.

export type Completion =
	| { kind: 'name'; prefix: string; start: number; end: number }
	| { kind: 'value'; label: string; prefix: string; start: number; end: number; quoted: boolean }
	| { kind: 'none' };

/**
 * Scans `text` up to `cursor`, tracking matchers `name op "value"` separated
 * by commas. In a name (or at a fresh position) → label names; after an
 * operator, inside or before the value → that label's values.
 */
export function completionAt(text: string, cursor: number): Completion {
	let i = 0;
	let state: 'name' | 'op' | 'value' | 'after' = 'name';
	let nameStart = 0;
	let label = '';
	let valueStart = 0;
	while (i < cursor) {
		const c = text[i];
		if (state === 'name') {
			if (/[A-Za-z0-9_.]/.test(c)) {
				i++;
				continue;
			}
			if (c === ' ' || c === ',') {
				if (i === nameStart || /^\s*$/.test(text.slice(nameStart, i))) {
					nameStart = i + 1;
				} else if (c === ',') {
					nameStart = i + 1;
				} else {
					label = text.slice(nameStart, i).trim();
					state = 'op';
				}
				i++;
				continue;
			}
			if (c === '=' || c === '!') {
				label = text.slice(nameStart, i).trim();
				state = 'op';
				continue;
			}
			return { kind: 'none' };
		} else if (state === 'op') {
			if (c === '=' || c === '!' || c === '~' || c === ' ') {
				i++;
				continue;
			}
			if (c === '"') {
				state = 'value';
				valueStart = i + 1;
				i++;
				continue;
			}
			return { kind: 'none' };
		} else if (state === 'value') {
			if (c === '\\') {
				i += 2;
				continue;
			}
			if (c === '"') state = 'after';
			i++;
		} else {
			if (c === ',') {
				state = 'name';
				nameStart = i + 1;
			}
			i++;
		}
	}
	if (state === 'name') {
		let s = nameStart;
		while (s < cursor && text[s] === ' ') s++;
		let e = cursor;
		while (e < text.length && /[A-Za-z0-9_.]/.test(text[e])) e++;
		return { kind: 'name', prefix: text.slice(s, cursor), start: s, end: e };
	}
	if (state === 'op') {
		// After `name=` with no quote yet: a value goes here, quoted on insert.
		const opText = text.slice(0, cursor);
		if (/(=|=~|!=|!~)\s*$/.test(opText)) {
			return { kind: 'value', label, prefix: '', start: cursor, end: cursor, quoted: false };
		}
		return { kind: 'none' };
	}
	if (state === 'value') {
		let e = cursor;
		while (e < text.length && text[e] !== '"') e++;
		if (e < text.length) e++; // the closing quote is replaced too
		return { kind: 'value', label, prefix: text.slice(valueStart, cursor), start: valueStart, end: e, quoted: true };
	}
	return { kind: 'none' };
}

function escapeValue(v: string): string {
	return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
}

/** Text and new cursor after choosing `choice` for completion `c`. */
export function applyCompletion(text: string, c: Completion, choice: string): { text: string; cursor: number } {
	if (c.kind === 'name') {
		const ins = choice + '="';
		const t = text.slice(0, c.start) + ins + text.slice(c.end).replace(/^="?/, '');
		return { text: t, cursor: c.start + ins.length };
	}
	if (c.kind === 'value') {
		const ins = (c.quoted ? '' : '"') + escapeValue(choice) + '"';
		const t = text.slice(0, c.start) + ins + text.slice(c.end);
		return { text: t, cursor: c.start + ins.length };
	}
	return { text, cursor: text.length };
}

/** Suggestions from a list: prefix matches first, then substring matches. */
export function rankSuggestions(all: string[], prefix: string, limit = 50): string[] {
	const p = prefix.toLowerCase();
	const starts: string[] = [];
	const contains: string[] = [];
	for (const s of all) {
		const l = s.toLowerCase();
		if (l.startsWith(p)) starts.push(s);
		else if (p && l.includes(p)) contains.push(s);
	}
	return starts.concat(contains).slice(0, limit);
}
