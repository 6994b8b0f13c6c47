// /docs in headless Chromium for a collection read only with credentials: Try it out without any is a 401; a
// token pasted into Authorize (the document's bearerAuth scheme) reads the token's tenant's rows.
import { createHmac } from 'node:crypto';
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { launchChromium } from '../helpers/browser.ts';
import { makeScratch, registryAhead } from '../helpers/collections.ts';
import { listening } from '../helpers/listening.ts';

const JWT_SECRET = 'a-secret-of-the-identity-provider-for-tests';
const DDL = `
  create table invoices (id int primary key, customer_id int not null, total numeric(10, 2) not null);
  create index on invoices (customer_id, id);
  insert into invoices select n, 1 + n % 4, n * 1.5 from generate_series(1, 40) n;`;
const FILE = `
collections:
  - relation: scratch.invoices
    columns: [id, customer_id, total]
    access: { rows: { customer_id: customer } }
`;

function tokenFor(payload: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ sub: 'reader', exp: Math.floor(Date.now() / 1000) + 3600, ...payload })}`;
  return `${body}.${createHmac('sha256', JWT_SECRET).update(body).digest('base64url')}`;
}

t.test('/docs: Authorize takes a token, and Try it out then reads its rows', async (t) => {
  const api = await testApp(t, { registry: await registryAhead(t, DDL, FILE), rateLimit: true, env: { JWT_SECRET } });
  await makeScratch(api.database.sql, DDL);
  const base = await listening(t, api.app);
  const page = await (await launchChromium(t)).newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(`${base}/docs`);
  const invoices = page.locator('#operations-collections-list_invoices');
  await invoices.waitFor({ timeout: 30_000 });
  await invoices.locator('.opblock-summary').first().click();
  await invoices.locator('.try-out__btn').click();

  const execute = async () => {
    await invoices.locator('button.execute').click();
    const live = invoices.locator('.live-responses-table tr.response');
    await live.waitFor({ timeout: 30_000 });
    const status = (await live.locator('.response-col_status').textContent())?.trim();
    const body = JSON.parse((await live.locator('.highlight-code pre').first().textContent()) ?? '');
    return { status, body };
  };
  const anonymous = await execute();
  t.equal(anonymous.status, '401', 'without credentials: 401');
  t.equal(anonymous.body.code, 'unauthorized');

  await page.locator('button.authorize').first().click();
  const dialog = page.locator('.modal-ux');
  await dialog
    .locator('input[type="text"], input[type="password"]')
    .first()
    .fill(tokenFor({ customer: 3 }));
  await dialog.locator('button.authorize').first().click();
  await dialog.locator('button.close-modal').first().click();
  await invoices
    .locator('button.btn-clear')
    .click()
    .catch(() => undefined);
  const authorized = await execute();
  t.equal(authorized.status, '200', 'with the pasted token: 200');
  t.ok(authorized.body.invoices.length > 0, 'its invoices');
  t.same([...new Set(authorized.body.invoices.map((invoice: { customer_id: number }) => invoice.customer_id))], [3], 'only customer 3');
  t.same(errors, [], 'no script error');
});
