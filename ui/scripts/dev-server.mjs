// UI development only (never used by the tests): serves build/ui and fixture
// JSON in the shape of docs/API.md, so the UI can be worked on without a
// kiln. `node ui/scripts/dev-server.mjs [PORT] [NODES]`, or point
// `npm run dev` at it with KILN_API=http://127.0.0.1:PORT.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const port = Number(process.argv[2] || 7071);
const N = Number(process.argv[3] || 20000);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../build/ui');
const TYPE = 'dev:samples:count:cpu:nanoseconds:delta';

function flame(diff) {
	// A random tree in pre-order: each node's children are generated recursively.
	const strings = ['', 'total', '/usr/bin/devapp', '/usr/lib/libc.so.6', 'app.c'];
	const nd = { name: [], binary: [], file: [], line: [], depth: [], parent: [], cum: [], self: [], diff: [] };
	let seed = 7;
	const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
	function add(parent, depth, budget) {
		const i = nd.name.length;
		strings.push(`fn_${depth}_${i % 997}`);
		nd.name.push(depth ? strings.length - 1 : 1);
		nd.binary.push(depth ? (rnd() < 0.2 ? 3 : 2) : 0);
		nd.file.push(depth ? 4 : 0);
		nd.line.push(depth ? 1 + (i % 300) : 0);
		nd.depth.push(depth);
		nd.parent.push(parent);
		nd.cum.push(0);
		nd.self.push(0);
		nd.diff.push(0);
		let kids = 0;
		let left = budget - 1;
		while (left > 0 && nd.name.length < N) {
			const share = Math.max(1, Math.floor(left * (0.2 + rnd() * 0.6)));
			kids += add(i, depth + 1, share);
			left -= share;
		}
		const self = 1 + Math.floor(rnd() * 100);
		nd.self[i] = self;
		nd.cum[i] = self + kids;
		nd.diff[i] = Math.round((rnd() - 0.5) * nd.cum[i] * 0.6);
		return nd.cum[i];
	}
	add(-1, 0, N);
	if (!diff) delete nd.diff;
	return { unit: 'count', total: nd.cum[0], filtered: nd.cum[0], height: Math.max(...nd.depth), strings, nodes: nd };
}

const now = Date.now();
const api = {
	'/api/v1/profile-types': () => ({ types: [{ key: TYPE, name: 'dev', sample_type: 'samples', sample_unit: 'count', period_type: 'cpu', period_unit: 'nanoseconds', delta: true }] }),
	'/api/v1/labels': () => ({ names: ['job', 'node'] }),
	'/api/v1/values': (q) => ({ values: q.get('label') === 'job' ? ['api', 'worker'] : ['n1', 'n2'] }),
	'/api/v1/query_range': () => ({
		unit: 'count',
		series: ['n1', 'n2'].map((n, k) => ({ labels: { job: 'api', node: n }, points: Array.from({ length: 30 }, (_, i) => [now - (30 - i) * 60000, 100 + k * 40 + ((i * 37) % 50)]) })),
	}),
	'/api/v1/query': (q) => (q.get('report') === 'top' ? { unit: 'count', total: 0, rows: [] } : flame(q.get('mode') === 'diff')),
	'/api/v1/targets': () => ({ active: [{ job: 'kiln', url: 'http://127.0.0.1:7070/debug/pprof/profile?seconds=10', labels: { job: 'kiln', instance: '127.0.0.1:7070' }, health: 'up', last_scrape: now - 3000, last_scrape_duration_ms: 10012, last_error: '' }], dropped: [] }),
};

http
	.createServer((req, res) => {
		const u = new URL(req.url, 'http://x');
		const h = api[u.pathname];
		if (h) {
			res.writeHead(200, { 'Content-Type': 'application/json' });
			return res.end(JSON.stringify(h(u.searchParams)));
		}
		let f = path.join(root, path.normalize(u.pathname));
		if (!f.startsWith(root) || !fs.existsSync(f) || fs.statSync(f).isDirectory()) f = path.join(root, 'index.html');
		res.writeHead(200, { 'Content-Type': f.endsWith('.js') ? 'text/javascript' : f.endsWith('.css') ? 'text/css' : 'text/html' });
		fs.createReadStream(f).pipe(res);
	})
	.listen(port, '127.0.0.1', () => console.log(`dev server (fixtures, ${N} nodes): http://127.0.0.1:${port}/`));
