// The web UI against a kiln that requires tokens (see ui_auth.sh): the page
// loads, the first API call is refused, the token form appears; a wrong
// token brings it back with the server's reason; a read token is accepted,
// kept in sessionStorage, and the UI shows the profile types and a merged
// icicle graph; a reload in the same tab does not ask again.
//
//   node ui_auth.mjs URL READ_TOKEN
import { createRequire } from 'node:module';
import { strict as assert } from 'node:assert';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const require = createRequire(path.join(root, 'ui/package.json'));
const { chromium } = require('playwright-core');

const [url, token] = process.argv.slice(2);
const TYPE = process.env.UI_TYPE;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
const tid = (id) => page.locator(`[data-testid="${id}"]`);

// 1. No token: the form, with the server's reason.
await page.goto(url + '/');
await tid('auth-form').waitFor({ timeout: 30000 });
assert.match(await tid('auth-why').innerText(), /needs a bearer token/);
console.log('step 1: token form shown:', await tid('auth-why').innerText());

// 2. A wrong token: asked again, saying it is invalid.
await tid('auth-token').fill('wrong-token-0123456789');
await tid('auth-submit').click();
await page.waitForFunction(() => /invalid bearer token/.test(document.querySelector('[data-testid="auth-why"]')?.textContent || ''), null, { timeout: 30000 });
console.log('step 2: wrong token refused');

// 3. The read token: the form goes, the types load.
await tid('auth-token').fill(token);
await tid('auth-submit').click();
await tid('auth-overlay').waitFor({ state: 'detached', timeout: 30000 });
await page.waitForFunction((t) => [...document.querySelectorAll('[data-testid="type-select-a"] option')].some((o) => o.value === t), TYPE, { timeout: 30000 });
assert.equal(await page.evaluate(() => sessionStorage.getItem('kiln.token')), token);
console.log('step 3: token accepted, profile types listed');

// 4. Data: a merged icicle graph of the pushed profile.
await tid('type-select-a').selectOption(TYPE);
await tid('search-a').click();
await page.waitForFunction(() => {
	const f = window.__kiln.flame();
	return f && f.n > 10;
}, null, { timeout: 60000 });
console.log('step 4: icicle graph with', await page.evaluate(() => window.__kiln.flame().n), 'frames');

// 5. Same tab, reloaded: no form, data again.
await page.reload();
await page.waitForFunction((t) => [...document.querySelectorAll('[data-testid="type-select-a"] option')].some((o) => o.value === t), TYPE, { timeout: 30000 });
assert.equal(await tid('auth-overlay').count(), 0, 'no token form after a reload');
console.log('step 5: reload keeps the token for the session');

assert.deepEqual(errors, [], 'no page errors');
await browser.close();
console.log('PASS');
