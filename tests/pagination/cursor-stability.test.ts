// Cursor survives concurrent writes (docs/reference/api.md, "Keyset pagination"): no repeats, no skips, nothing inserted behind it.
import type { Sql } from 'postgres';
import t from 'tap';
// mulberry32, seeded, so a failure replays.
import { random } from '../../demo/seed.ts';
import { pathOf, type TestApp, testApp } from '../helpers/app.ts';
import { scratchSession, withSession } from '../helpers/db.ts';

type Row = { id: number; a: number | string; b: string };

interface Scenario {
  readonly collection: 'orders' | 'products';
  readonly path: string;
  /** The walk's order over (a, b, id): negative when x comes first. */
  readonly compare: (x: Row, y: Row) => number;
  /** Inserts rows with the given keys on the other connection; returns them with their ids. */
  readonly insert: (sql: Sql, keys: { a: number | string; b: string }[]) => Promise<Row[]>;
  /** Draws the keys of a new row; few distinct values, so new rows often tie with the position. */
  readonly keys: (next: () => number) => { a: number | string; b: string };
  readonly rowOf: (item: Record<string, unknown>) => Row;
}

const stamp = (n: number) => `2026-02-01T00:00:00.${String(n).padStart(6, '0')}Z`;
const cmp = (x: number | string, y: number | string) => (x < y ? -1 : x > y ? 1 : 0);

const scenarios: Scenario[] = [
  {
    // orders: the default order, newest first (-createdAt, -id); a = createdAt, b unused.
    collection: 'orders',
    path: '/v1/orders?page-size=13',
    compare: (x, y) => -cmp(x.a, y.a) || -cmp(x.id, y.id),
    keys: (next) => ({ a: stamp(Math.floor(next() * 40)), b: '' }),
    insert: async (sql, keys) =>
      (
        await sql`insert into demo.orders (customer_id, status, total_cents, created_at)
        select 1, 'paid', 1000, t::timestamptz from unnest(${keys.map((k) => k.a as string)}::text[]) as t
        returning id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as a`
      ).map((r) => ({
        id: Number(r.id),
        a: r.a as string,
        b: '',
      })),
    rowOf: (item) => ({ id: item.id as number, a: item.createdAt as string, b: '' }),
  },
  {
    // products with mixed directions: -priceCents, createdAt, then id ascending (the direction of createdAt).
    collection: 'products',
    path: '/v1/products?page-size=11&sort=-priceCents,createdAt',
    compare: (x, y) => -cmp(x.a, y.a) || cmp(x.b, y.b) || cmp(x.id, y.id),
    keys: (next) => ({ a: 100 * (1 + Math.floor(next() * 5)), b: stamp(Math.floor(next() * 8)) }),
    insert: async (sql, keys) =>
      (
        await sql`insert into demo.products (name, category, price_cents, created_at)
        select 'New', 'books', p, c::timestamptz
        from unnest(${keys.map((k) => k.a as number)}::int[], ${keys.map((k) => k.b)}::text[]) as u(p, c)
        returning id, price_cents as a, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as b`
      ).map((r) => ({
        id: Number(r.id),
        a: Number(r.a),
        b: r.b as string,
      })),
    rowOf: (item) => ({ id: item.id as number, a: item.priceCents as number, b: item.createdAt as string }),
  },
];

async function initialRows(app: TestApp, scenario: Scenario, next: () => number): Promise<Row[]> {
  return withSession(app.database.url, (other) =>
    scenario.insert(
      other,
      Array.from({ length: 300 }, () => scenario.keys(next)),
    ),
  );
}

for (const scenario of scenarios) {
  t.test(`${scenario.collection}: a walk survives inserts before and after its position and deletes ahead of it`, async (t) => {
    const app = await testApp(t);
    const next = random(scenario.collection.length);
    const initial = await initialRows(app, scenario, next);
    // The other connection: a separate client, as another user of the service would be.
    const other = scratchSession(t, app.database.url);

    const live = new Map(initial.map((row) => [row.id, row]));
    const deleted = new Set<number>();
    const insertedBehind = new Set<number>();
    const insertedAhead = new Set<number>();
    const seen: Row[] = [];
    let url: string | undefined = scenario.path;
    let position: Row | undefined;
    let chunks = 0;
    while (url) {
      if (++chunks > 200) throw new Error('The walk does not end');
      // While the chunk is being read, the other connection inserts rows that sort at or before the position.
      const behindKeys = position ? Array.from({ length: 2 }, () => scenario.keys(next)) : [];
      const [response, concurrent]: [Awaited<ReturnType<TestApp['json']>>, Row[]] = await Promise.all([
        app.json(url),
        scenario.insert(other, behindKeys),
      ]);
      for (const row of concurrent) {
        if (position && scenario.compare(row, position) < 0) insertedBehind.add(row.id);
        // A row that sorts ahead and committed during the request may or may not be in this chunk: not judged.
      }
      t.equal(response.status, 200);
      const items = (response.body[scenario.collection] as Record<string, unknown>[]).map(scenario.rowOf);
      seen.push(...items);
      position = items.at(-1) ?? position;
      url = response.body._links.next && pathOf(response.body._links.next.href);
      if (!url || !position) break;

      // Between chunks: rows on both sides of the position, and deletes of rows not reached yet.
      const rows = await scenario.insert(
        other,
        Array.from({ length: 4 }, () => scenario.keys(next)),
      );
      for (const row of rows) {
        live.set(row.id, row);
        (scenario.compare(row, position) < 0 ? insertedBehind : insertedAhead).add(row.id);
      }
      const ahead = [...live.values()].filter((row) => scenario.compare(row, position!) > 0);
      const doomed = ahead.filter(() => next() < 0.03).map((row) => row.id);
      if (doomed.length > 0) {
        await other`delete from ${other(`demo.${scenario.collection}`)} where id = any(${doomed}::bigint[])`;
        for (const id of doomed) {
          live.delete(id);
          deleted.add(id);
          insertedAhead.delete(id);
        }
      }
    }

    const ids = seen.map((row) => row.id);
    t.equal(new Set(ids).size, ids.length, 'no item is repeated');
    t.same(
      seen.filter((row, i) => i > 0 && scenario.compare(seen[i - 1]!, row) >= 0),
      [],
      'items come in the order of the walk: none at or before the one ahead of it',
    );
    const seenIds = new Set(ids);
    const missing = initial.filter((row) => !deleted.has(row.id) && !seenIds.has(row.id));
    t.same(missing, [], 'no item that existed throughout is skipped');
    t.same(
      ids.filter((id) => insertedBehind.has(id)),
      [],
      'no item inserted behind the position shows up',
    );
    t.same(
      ids.filter((id) => deleted.has(id)),
      [],
      'no deleted item shows up',
    );
    t.same(
      [...insertedAhead].filter((id) => !seenIds.has(id)),
      [],
      'items inserted ahead of the position are reached',
    );
    t.ok(
      insertedBehind.size > 20 && deleted.size > 3 && insertedAhead.size > 20,
      `the walk met concurrent writes (${insertedBehind.size} behind, ${insertedAhead.size} ahead, ${deleted.size} deleted)`,
    );
  });
}
