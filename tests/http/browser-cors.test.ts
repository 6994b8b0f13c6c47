// A real browser reads the API cross-origin: headless Chromium (Debian's) on a page served from another port fetches chunks and reads their headers.

import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { pageResults } from '../helpers/browser.ts';
import { listening } from '../helpers/listening.ts';

/** What the page's script reports of each fetch. */
interface Seen {
  status: number;
  remaining: string | null;
  link: string | null;
  etag: string | null;
  requestId: string | null;
  items: number | undefined;
}

t.test('a page on another origin fetches chunks and reads X-RateLimit-Remaining, Link, ETag and X-Request-Id', async (t) => {
  const api = await testApp(t, { seed: { products: 30 }, rateLimit: true });
  const apiOrigin = await listening(t, api.app);
  const { key } = await (await fetch(`${apiOrigin}/v1/keys`, { method: 'POST' })).json();

  // The page, on a port of its own (another origin than the API's), with the script a client app would run:
  // plain text, as a browser gets it.
  const script = `
    const read = async (response) => ({
      status: response.status,
      remaining: response.headers.get('X-RateLimit-Remaining'),
      link: response.headers.get('Link'),
      etag: response.headers.get('ETag'),
      requestId: response.headers.get('X-Request-Id'),
      items: response.status === 200 ? (await response.json()).products.length : undefined,
    });
    (async () => {
      const url = ${JSON.stringify(`${apiOrigin}/v1/products?limit=5&category[in]=books,toys,tools,games,garden,kitchen,music,outdoor`)};
      const auth = { Authorization: 'Bearer ${key}' };
      const fresh = { cache: 'no-store' }; // past the browser's cache: what the API answers
      const anonymous = await read(await fetch(url, fresh)); // a simple request: no preflight
      const keyed = await read(await fetch(url, { ...fresh, headers: auth })); // preflighted
      const again = await read(await fetch(url, { ...fresh, headers: { ...auth, 'If-None-Match': keyed.etag } }));
      // Through the browser's cache: the first is stored, the second revalidated by the browser itself.
      const cached = url + '&sort=name';
      const stored = await read(await fetch(cached, { headers: auth }));
      const revalidated = await read(await fetch(cached, { headers: auth }));
      window.results = [anonymous, keyed, again, stored, revalidated];
    })().catch((error) => { window.results = String(error); });`;
  const seen = await pageResults(t, `<!doctype html><title>client</title><script>${script}</script>`, { timeoutMs: 30_000 });
  const [anonymous, keyed, again, stored, revalidated] = seen as [Seen, Seen, Seen, Seen, Seen];
  t.equal(anonymous.status, 200);
  t.equal(anonymous.remaining, '59', 'the page reads the anonymous allowance');
  t.match(
    anonymous.link,
    /<http:\/\/127\.0\.0\.1:\d+\/v1\/products\?limit=5&offset=5&category%5Bin%5D=[^>]+>; rel="next"/,
    'and the Link header',
  );
  t.equal(anonymous.items, 5);
  t.match(anonymous.requestId, /^[0-9a-f-]{36}$/);
  t.equal(keyed.status, 200, 'a request with Authorization passes its preflight');
  t.equal(keyed.remaining, '599', 'counted on the key');
  t.match(keyed.etag, /^W\//);
  t.equal(again.status, 304, 'If-None-Match from a page: a 304');
  t.equal(again.remaining, '599', 'free');
  t.equal(stored.remaining, '598');
  t.equal(revalidated.status, 200, "the browser's own revalidation: its stored copy, refreshed by a 304");
  t.equal(revalidated.items, 5);
  t.equal(revalidated.remaining, '598', 'which cost nothing');
});
