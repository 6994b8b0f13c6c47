// Debian's headless Chromium for the browser tests, driven by playwright-core (never a downloaded browser).
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';

/**
 * tap's `skip` for a browser test: why it cannot run here (no Chromium, outside CI), else false. On CI
 * (.ci/run installs Chromium) it always runs, and fails if the browser is missing.
 */
export const noBrowser: string | false =
  existsSync(CHROMIUM) || process.env.CI ? false : `${CHROMIUM} is not installed (Debian's chromium package; .ci/run installs it)`;

/** Starts headless Chromium; closed at teardown. */
export async function launchChromium(t: { teardown(fn: () => unknown): void }): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
  });
  t.teardown(() => browser.close());
  return browser;
}
