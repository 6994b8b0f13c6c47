// Property: every timestamp the service accepts, PostgreSQL accepts too, as the same instant; the rest is a 400 naming the parameter.
import { isDeepStrictEqual } from 'node:util';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import fc from 'fast-check';
import postgres from 'postgres';
import t from 'tap';
import { formatEpoch } from '../../db/timestamps.ts';
import { demoRegistry } from '../../demo/collections.ts';
import { ApiError } from '../../lib/http/errors.ts';
import { createRegistry } from '../../lib/pagination/registry.ts';
import { parseTimestamp } from '../../lib/pagination/timestamps.ts';
import { testApp } from '../helpers/app.ts';
import { snapshotRegistry } from '../helpers/collections.ts';
import { testDatabase } from '../helpers/db.ts';

interface Parts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  fraction: string;
  t: 'T' | 't';
  /** null: Z or z. */
  offset: { sign: '+' | '-'; hours: number; minutes: number } | null;
  z: 'Z' | 'z';
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

function text(p: Parts): string {
  const zone = p.offset ? `${p.offset.sign}${pad(p.offset.hours)}:${pad(p.offset.minutes)}` : p.z;
  const fraction = p.fraction === '' ? '' : `.${p.fraction}`;
  return `${pad(p.year, 4)}-${pad(p.month)}-${pad(p.day)}${p.t}${pad(p.hour)}:${pad(p.minute)}:${pad(p.second)}${fraction}${zone}`;
}

// The oracle, written independently of the service: the proleptic Gregorian calendar RFC 3339 uses.
function isLeap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}
function daysIn(year: number, month: number): number {
  return [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
}
function valid(p: Parts): boolean {
  return (
    p.year >= 1 &&
    p.month >= 1 &&
    p.month <= 12 &&
    p.day >= 1 &&
    p.day <= daysIn(p.year, p.month) &&
    p.hour <= 23 &&
    p.minute <= 59 &&
    p.second <= 59 &&
    p.fraction.length <= 6 &&
    (p.offset === null || (p.offset.hours <= 15 && p.offset.minutes <= 59))
  );
}
/** Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): bigint {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return BigInt(era * 146097 + doe - 719468);
}
/** Microseconds since the Unix epoch of the instant the parts name. */
function instant(p: Parts): bigint {
  const offset = p.offset ? (p.offset.sign === '+' ? 1 : -1) * (p.offset.hours * 3600 + p.offset.minutes * 60) : 0;
  const seconds = daysFromCivil(p.year, p.month, p.day) * 86400n + BigInt(p.hour * 3600 + p.minute * 60 + p.second - offset);
  return seconds * 1_000_000n + BigInt(p.fraction.padEnd(6, '0').slice(0, 6) || '0');
}

const edge = <T>(edges: T[], rest: fc.Arbitrary<T>) => fc.oneof(fc.constantFrom(...edges), rest);
const parts: fc.Arbitrary<Parts> = fc.record({
  year: edge([0, 1, 4, 99, 100, 400, 1582, 1900, 1970, 2000, 2024, 9999], fc.integer({ min: 0, max: 9999 })),
  month: edge([1, 2, 12], fc.integer({ min: 0, max: 13 })),
  day: edge([1, 28, 29, 30, 31], fc.integer({ min: 0, max: 32 })),
  hour: edge([0, 23, 24], fc.integer({ min: 0, max: 24 })),
  minute: edge([0, 59, 60], fc.integer({ min: 0, max: 60 })),
  second: edge([0, 59, 60], fc.integer({ min: 0, max: 60 })),
  fraction: fc.oneof(
    fc.constant(''),
    fc.constantFrom('0', '999999', '000001', '5'),
    fc.array(fc.constantFrom(...'0123456789'), { minLength: 1, maxLength: 7 }).map((digits) => digits.join('')),
  ),
  t: fc.constantFrom('T' as const, 't' as const),
  offset: fc.option(
    fc.record({
      sign: fc.constantFrom('+' as const, '-' as const),
      hours: edge([0, 14, 15, 16, 23], fc.integer({ min: 0, max: 23 })),
      minutes: edge([0, 59], fc.integer({ min: 0, max: 59 })),
    }),
    { freq: 4 },
  ),
  z: fc.constantFrom('Z' as const, 'z' as const),
});

function accepted(name: string, value: string): string | ApiError {
  try {
    return parseTimestamp(name, value);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
}

t.test('what parseTimestamp accepts, PostgreSQL casts to the same instant, in any session time zone', async (t) => {
  const db = await testDatabase(t);
  // The service's cast (a timestamp's literal: text bound as `$1::timestamptz`, through drizzle, which keeps postgres.js
  // from turning the text into a JS Date and dropping microseconds); a session TimeZone must not change it.
  const zones = ['UTC', 'Pacific/Kiritimati', 'America/St_Johns', 'Asia/Kathmandu'];
  const clients = zones.map((zone) => postgres(db.url, { max: 1, onnotice: () => {}, connection: { TimeZone: zone } }));
  const sessions = clients.map((client) => drizzle(client));
  t.teardown(() => Promise.all(clients.map((client) => client.end())));
  // The value type of a timestamptz field: the demo events' occurredAt.
  const timestamp = demoRegistry().get('events')!.fields.get('occurredAt')!.value;
  let acceptedCount = 0;
  await fc.assert(
    fc.asyncProperty(parts, fc.nat(zones.length - 1), async (p, zone) => {
      const value = text(p);
      const result = accepted('before', value);
      if (result instanceof ApiError) {
        // A 400 naming the parameter, and the oracle agrees it is not a timestamp the API takes.
        return result.options.invalidParams?.[0]?.name === 'before' && !valid(p);
      }
      acceptedCount++;
      if (!valid(p)) return false;
      const [row] = await sessions[zone]!.execute<{ micros: string }>(
        sql`select (extract(epoch from ${timestamp.literal(result)}) * 1000000)::numeric(30, 0)::text as micros`,
      );
      return BigInt(row!.micros) === instant(p);
    }),
    { numRuns: 3000 },
  );
  t.ok(acceptedCount > 500, `the generator reached accepted values too (${acceptedCount})`);
});

t.test('through the real service: before, after and a timestamp filter are a 200 or a 400 naming the parameter, never a 500', async (t) => {
  // A collection with a filter on a timestamp, over the products table (the demo ones filter no timestamp).
  const stamped = snapshotRegistry(`
collections:
  - relation: demo.products
    name: stamped
    fieldNames: camelCase
    columns: [id, created_at]
    variants: [offset]
    filters: { created_at: [eq, lt, gte, in] }
    sort: [id]
    order: id
`);
  const api = await testApp(t, { registry: createRegistry([...demoRegistry().values(), ...stamped.values()]) });
  await api.database
    .sql`insert into demo.events (type, source, occurred_at) values ('login', 'web', '2025-01-01T00:00:00Z'), ('login', 'web', '0001-01-01T00:00:00Z')`;
  await api.database
    .sql`insert into demo.products (name, category, price_cents, created_at) values ('a', 'books', 1, '9999-12-31T23:59:59.999999Z')`;
  const params = ['before', 'after', 'createdAt', 'createdAt[lt]', 'createdAt[gte]', 'createdAt[in]'];
  await fc.assert(
    fc.asyncProperty(parts, fc.constantFrom(...params), async (p, param) => {
      const value = text(p);
      const path = param === 'before' || param === 'after' ? '/v1/events' : '/v1/stamped';
      const sent = param === 'createdAt[in]' ? `2025-01-01T00:00:00Z,${value}` : value;
      const res = await api.request(`${path}?${encodeURIComponent(param)}=${encodeURIComponent(sent)}`);
      const body = (await res.json()) as { invalid_params?: { name: string }[] };
      if (valid(p)) return res.status === 200;
      return res.status === 400 && body.invalid_params?.[0]?.name === param;
    }),
    { numRuns: 400 },
  );
});

t.test('offsets of ±16:00 to ±23:59 are a 400 that says the range', async (t) => {
  const api = await testApp(t);
  for (const value of ['2025-01-01T00:00:00+16:00', '2025-01-01T00:00:00-23:59', '2025-01-01T00:00:00.5+19:30']) {
    const res = await api.request(`/v1/events?after=${encodeURIComponent(value)}`);
    t.equal(res.status, 400, value);
    t.same(((await res.json()) as { invalid_params: unknown }).invalid_params, [
      { name: 'after', reason: 'must have a UTC offset from -15:59 to +15:59' },
    ]);
  }
  for (const value of ['2025-01-01T00:00:00+15:59', '2025-01-01T00:00:00-15:59', '0001-01-01T00:00:00+15:59']) {
    t.equal((await api.request(`/v1/events?after=${encodeURIComponent(value)}`)).status, 200, value);
  }
});

// Items print timestamps in JS (formatEpoch over extract(epoch …)); before, PostgreSQL printed them with to_char.
const TO_CHAR = `to_char(t at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
const PRINTABLE = `t >= '0001-01-01T00:00:00Z' and t < '10000-01-01T00:00:00Z'`;

t.test(
  'formatEpoch prints byte for byte what to_char printed, in any session time zone; nothing for what RFC 3339 cannot print',
  async (t) => {
    const db = await testDatabase(t);
    const zones = ['UTC', 'America/St_Johns', 'Pacific/Kiritimati', 'Europe/Amsterdam'];
    const clients = zones.map((zone) => postgres(db.url, { max: 1, onnotice: () => {}, connection: { TimeZone: zone } }));
    t.teardown(() => Promise.all(clients.map((client) => client.end())));
    type Row = { epoch: string; printed: string | null; printable: boolean };
    // What formatEpoch prints of each row, and what it should: to_char's text, nothing where RFC 3339 cannot print.
    const printed = (rows: Row[]) => rows.map((row) => formatEpoch(row.epoch));
    const expected = (rows: Row[]) => rows.map((row) => (row.printable ? row.printed : undefined));
    const compare = (rows: Row[]) => isDeepStrictEqual(printed(rows), expected(rows));
    // A sweep of the whole range, one query: every 36 days, 1 hour and 1.000001 s from year 1 to 9999 (about 100,000
    // instants, every year, leap days and century years among them, all hours and many microsecond values).
    const sweep = (await clients[1]!.unsafe(
      `select extract(epoch from t)::text as epoch, ${TO_CHAR} as printed, ${PRINTABLE} as printable
     from generate_series('0001-01-01T00:00:00Z'::timestamptz, '9999-12-31T23:59:59.999999Z', interval '36 days 1 hour 1.000001 second') as t`,
    )) as unknown as Row[];
    t.ok(sweep.length > 99_000, `${sweep.length} instants`);
    const wrong = sweep.filter((row) => formatEpoch(row.epoch) !== row.printed);
    t.same(wrong.slice(0, 5), [], 'the sweep prints identically');
    // The edges, and what the constraints refuse (guarded anyway: undefined, never a wrong instant).
    const edges = [
      '0001-01-01T00:00:00Z',
      '0001-01-01T00:00:00.000001Z',
      '0001-12-31T23:59:59.999999Z',
      '1969-12-31T23:59:59.999999Z',
      '1970-01-01T00:00:00Z',
      '1970-01-01T00:00:00.000001Z',
      '2000-02-29T12:00:00.5Z',
      '2100-03-01T00:00:00Z',
      '9999-12-31T23:59:59.999999Z',
      '0001-01-01T00:00:00+00:01',
      '0001-12-31 23:59:59.999999+00 BC',
      '0044-03-15 12:00:00+00 BC',
      '10000-01-01T00:00:00Z',
      '9999-12-31T23:59:59.999999-00:01',
      '294276-12-31 23:59:59+00',
      'infinity',
      '-infinity',
    ];
    for (const [at, client] of clients.entries()) {
      const rows = (await client.unsafe(
        `select extract(epoch from t)::text as epoch, ${TO_CHAR} as printed, ${PRINTABLE} as printable from unnest($1::timestamptz[]) as t`,
        [`{${edges.map((edge) => `"${edge}"`).join(',')}}`],
      )) as unknown as Row[];
      t.equal(rows.filter((row) => !row.printable).length, 8, `${zones[at]}: eight edges RFC 3339 cannot print`);
      t.same(printed(rows), expected(rows), `${zones[at]}: the edges`);
    }
    // Random instants written as RFC 3339 with any offset, 500 to a query, in every session time zone.
    let printable = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(parts, { minLength: 500, maxLength: 500 }), fc.nat(zones.length - 1), async (batch, zone) => {
        const texts = batch.map(text).filter((value) => !(accepted('after', value) instanceof ApiError));
        const rows = (await clients[zone]!.unsafe(
          `select extract(epoch from t)::text as epoch, ${TO_CHAR} as printed, ${PRINTABLE} as printable from unnest($1::text[]) as s, cast(s as timestamptz) as t`,
          [`{${texts.map((value) => `"${value}"`).join(',')}}`],
        )) as unknown as Row[];
        printable += rows.filter((row) => row.printable).length;
        return rows.length === texts.length && compare(rows);
      }),
      { numRuns: 150 },
    );
    t.ok(printable > 15_000, `${printable} random instants printed identically`);
  },
);
