// The bench's floor (bench/floor-server.ts) answers the chunk it stands in for exactly as the service does:
// the same items in the same order and JSON, the same links and cursor payload (docs/reference/bench.md, "The floor").
import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { cursorPayload, seedTrickyProducts, startBenchServer } from '../helpers/price-chunk.ts';

const CHUNK = '/v1/products?page-size=20&sort=priceCents';

t.test('the floor answers the first chunk by price as the service does', async (t) => {
  const { database, json } = await testApp(t);
  await seedTrickyProducts(database.sql);

  const { origin } = await startBenchServer(t, 'bench/floor-server.ts', { DATABASE_URL: database.url });

  const service = await json(CHUNK);
  const response = await fetch(`${origin}${CHUNK}`);
  t.equal(response.status, 200);
  t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8');
  const body = (await response.json()) as typeof service.body;
  t.equal(service.status, 200);
  t.equal(service.body.products.length, 20);
  t.same(Object.keys(body), Object.keys(service.body), 'the same fields, in the same order');
  t.equal(JSON.stringify(body.products), JSON.stringify(service.body.products), 'the same items, byte for byte');
  t.equal(body.pageSize, service.body.pageSize);
  t.equal(body._links.self.href.replace(origin, ''), service.body._links.self.href.replace('http://test.local', ''));
  t.strictSame(cursorPayload(body._links.next.href), cursorPayload(service.body._links.next.href), 'the same cursor payload');
  t.match(response.headers.get('link'), /^<[^>]+>; rel="self", <[^>]+>; rel="next"$/);
  for (const header of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit-policy', 'ratelimit']) {
    t.ok(response.headers.get(header), `${header} is set`);
  }

  const [counter] = await database.sql`select used from bench_floor_counters`;
  t.equal(counter?.used, 1, 'one counter upsert per request');
  t.equal((await fetch(`${origin}/v1/products?page-size=21&sort=priceCents`)).status, 404, 'nothing but that one chunk');

  // From a price on: the bench's rows where every request asks for another chunk. 30 rows at 100 to 102
  // cents: from 100, a next chunk; from 101, exactly one page and none; from 102, ten items.
  for (const [price, count, next] of [
    [100, 20, true],
    [101, 20, false],
    [102, 10, false],
  ] as const) {
    const from = `${CHUNK}&priceCents[gte]=${price}`;
    const served = await json(from);
    const floorAnswer = await fetch(`${origin}${from}`);
    t.equal(floorAnswer.status, 200);
    const floorBody = (await floorAnswer.json()) as typeof served.body;
    t.equal(served.status, 200);
    t.equal(served.body.products.length, count);
    t.same(
      served.body.products.filter((item: { priceCents: number }) => item.priceCents < price),
      [],
      `from ${price} cents on`,
    );
    t.equal(
      JSON.stringify(floorBody),
      JSON.stringify({ ...served.body, _links: floorBody._links }),
      `from ${price}: the same fields and items`,
    );
    t.equal(floorBody._links.self.href.replace(origin, ''), served.body._links.self.href.replace('http://test.local', ''));
    t.equal(Boolean(floorBody._links.next), next);
    t.equal(Boolean(served.body._links.next), next);
    if (next)
      t.strictSame(cursorPayload(floorBody._links.next.href), cursorPayload(served.body._links.next.href), 'the same cursor payload');
  }
  for (const bad of ['priceCents[gte]=', 'priceCents[gte]=1.5', 'priceCents[gte]=-1', 'priceCents[lt]=5']) {
    t.equal((await fetch(`${origin}${CHUNK}&${bad}`)).status, 404, `not ${bad}`);
  }
});
