// Debian's headless Chromium for the browser tests, driven by playwright-core (never a downloaded browser).
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { type Browser, chromium } from 'playwright-core';
import { freePort } from './processes.ts';

const CHROMIUM = '/usr/bin/chromium';

type Teardown = { teardown(fn: () => unknown): void };

/** Starts headless Chromium; closed at teardown. `npm test` installs it when it is missing (scripts/test-packages.sh). */
export async function launchChromium(t: Teardown): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (npm test does, as root)`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
  });
  t.teardown(() => browser.close());
  return browser;
}

/**
 * Serves `html` as a page of its own origin (another port than the API's), with `scripts` beside it by path
 * (`{ '/client.js': … }`), opens it in headless Chromium, and resolves to what the page's script sets
 * `window.results` to; a string there is the script's error, thrown.
 */
export async function pageResults(
  t: Teardown,
  html: string,
  options: { scripts?: Readonly<Record<string, string>>; timeoutMs: number },
): Promise<unknown> {
  const port = await freePort();
  const page = createServer((request, response) => {
    const script = options.scripts?.[request.url ?? ''];
    if (script !== undefined) {
      response.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' });
      response.end(script);
      return;
    }
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(html);
  });
  page.listen(port, '127.0.0.1');
  await once(page, 'listening');
  t.teardown(() => page.close());

  const browser = await launchChromium(t);
  const tab = await browser.newPage();
  await tab.goto(`http://127.0.0.1:${port}/`);
  await tab.waitForFunction('window.results !== undefined', undefined, { timeout: options.timeoutMs });
  const results = await tab.evaluate('window.results');
  if (typeof results === 'string') throw new Error(`The page's script failed: ${results}`);
  return results;
}
