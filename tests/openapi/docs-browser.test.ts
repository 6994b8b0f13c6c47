// /docs in a real browser: Debian's headless Chromium (driven by playwright-core, never a downloaded browser)
// renders the collections, their parameters and the rate-limit headers from /openapi.json, loads nothing from
// outside the service, and a "Try it out" call returns a chunk.
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { launchChromium } from '../helpers/browser.ts';
import { listening } from '../helpers/listening.ts';

t.test('/docs renders the API in headless Chromium, from this service alone, and Try it out gets a chunk', async (t) => {
  const api = await testApp(t, { seed: { products: 30, orders: 5, events: 5 }, rateLimit: true });
  const base = await listening(t, api.app);
  const browser = await launchChromium(t);
  const page = await browser.newPage();
  const requested: string[] = [];
  const problems: string[] = [];
  page.on('request', (request) => requested.push(request.url()));
  page.on('requestfailed', (request) => problems.push(`failed: ${request.url()} ${request.failure()?.errorText}`));
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`${response.status()}: ${response.url()}`);
  });
  // A blocked load (the page's Content-Security-Policy) or a script error shows up here.
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));

  await page.goto(`${base}/docs`);
  for (const collection of ['products', 'orders', 'events']) {
    await page.locator(`#operations-collections-list_${collection}`).waitFor({ timeout: 30_000 });
    t.match(await page.locator(`#operations-collections-list_${collection} .opblock-summary-path`).textContent(), `/v1/${collection}`);
  }

  const products = page.locator('#operations-collections-list_products');
  await products.locator('.opblock-summary').first().click();
  const parameters = products.locator('.parameters');
  await parameters.waitFor();
  const names = await parameters.locator('.parameter__name').allTextContents();
  const rendered = names.map((name) => name.replace(/\s*\*?\s*required$/, '').trim());
  for (const name of [
    'limit',
    'offset',
    'page',
    'page-size',
    'cursor',
    'sort',
    'count',
    'priceCents[lt]',
    'category[in]',
    'name[prefix]',
  ]) {
    t.ok(rendered.includes(name), `the parameter ${name} is rendered (of ${rendered.join(', ')})`);
  }
  const responses = await products.locator('.responses-wrapper').textContent();
  for (const header of [
    'X-RateLimit-Limit',
    'X-RateLimit-Remaining',
    'X-RateLimit-Reset',
    'RateLimit-Policy',
    'RateLimit',
    'Retry-After',
    'Link',
  ]) {
    t.match(responses, header, `the header ${header} is rendered`);
  }

  await products.locator('.try-out__btn').click();
  await products.locator('tr[data-param-name="limit"] input').fill('3');
  await products.locator('button.execute').click();
  const live = products.locator('.live-responses-table tr.response');
  await live.waitFor({ timeout: 30_000 });
  t.equal((await live.locator('.response-col_status').textContent())?.trim(), '200', 'Try it out: 200', {
    response: await live.textContent(),
  });
  const body = JSON.parse((await live.locator('.highlight-code pre').first().textContent()) ?? '');
  t.equal(body.products.length, 3, 'a chunk of three products');
  t.equal(body.limit, 3);
  t.match(body._links.next?.href, 'limit=3', 'with its links');
  t.match(await live.textContent(), /x-ratelimit-remaining/i, 'and its rate-limit headers');

  const outside = requested.filter((url) => !url.startsWith(`${base}/`) && !url.startsWith('data:'));
  t.same(outside, [], 'no request leaves the service');
  t.ok(requested.includes(`${base}/openapi.json`), 'the page read /openapi.json');
  t.ok(
    requested.some((url) => url.startsWith(`${base}/v1/products?`)),
    'Try it out called the service itself',
  );
  t.same(problems, [], 'no request failed, nothing was blocked, no script error');
});
