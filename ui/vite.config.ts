import { defineConfig } from 'vite';

// The UI is served by kiln from one directory (build/ui): relative asset
// paths, no CDN, nothing fetched at run time. `npm run dev` proxies the API
// to a kiln (or to scripts/dev-server.mjs with fixture JSON).
export default defineConfig({
	base: './',
	build: { target: 'es2020', sourcemap: false, chunkSizeWarningLimit: 400 },
	server: {
		proxy: { '/api': process.env.KILN_API ?? 'http://127.0.0.1:7070' },
	},
	test: { include: ['test/**/*.test.ts'], environment: 'node' },
} as Parameters<typeof defineConfig>[0]);
