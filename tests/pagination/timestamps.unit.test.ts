// RFC 3339 timestamps, without a database: what parseTimestamp takes and how it normalises it, and isTimestampText.
import fc from 'fast-check';
import t from 'tap';
import { formatEpoch } from '../../db/timestamps.ts';
import { isTimestampText, parseTimestamp } from '../../lib/pagination/timestamps.ts';
import { invalidParameter, problemOf } from '../helpers/problem.ts';

const FORMAT = 'must be an RFC 3339 timestamp with at most six fractional digits, e.g. 2026-11-21T10:00:00.123456Z';
const OFFSET = 'must have a UTC offset from -15:59 to +15:59';

t.test('valid timestamps come back with six fractional digits and a numeric offset, as PostgreSQL reads them', async (t) => {
  const cases: [string, string][] = [
    ['2026-11-21T10:00:00Z', '2026-11-21T10:00:00.000000+00:00'],
    ['2026-11-21t10:00:00z', '2026-11-21T10:00:00.000000+00:00'],
    ['2026-11-21T10:00:00.1Z', '2026-11-21T10:00:00.100000+00:00'],
    ['2026-11-21T10:00:00.000001Z', '2026-11-21T10:00:00.000001+00:00'],
    ['2026-11-21T10:00:00.123456+05:30', '2026-11-21T10:00:00.123456+05:30'],
    ['2026-11-21T23:59:59.999999-15:59', '2026-11-21T23:59:59.999999-15:59'],
    ['0001-01-01T00:00:00+15:59', '0001-01-01T00:00:00.000000+15:59'],
    ['9999-12-31T23:59:59.999999Z', '9999-12-31T23:59:59.999999+00:00'],
    ['2026-01-01T00:00:00-00:00', '2026-01-01T00:00:00.000000-00:00'],
  ];
  for (const [value, normalised] of cases) t.equal(parseTimestamp('after', value), normalised, value);
});

t.test('leap years by the Gregorian rule, and month lengths', async (t) => {
  for (const year of ['2024', '2000', '1600', '0004', '0400'])
    t.ok(parseTimestamp('before', `${year}-02-29T00:00:00Z`), `${year} is a leap year`);
  for (const year of ['2023', '1900', '2100', '0100', '0001']) {
    t.same(
      problemOf(() => parseTimestamp('before', `${year}-02-29T00:00:00Z`)),
      invalidParameter('before', FORMAT),
      `${year} is not`,
    );
  }
  const days = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  days.forEach((last, index) => {
    const month = String(index + 1).padStart(2, '0');
    t.ok(parseTimestamp('before', `2023-${month}-${last}T00:00:00Z`), `2023-${month} has ${last} days`);
    t.same(
      problemOf(() => parseTimestamp('before', `2023-${month}-${last + 1}T00:00:00Z`)),
      invalidParameter('before', FORMAT),
      `2023-${month}-${last + 1}`,
    );
  });
});

t.test('anything else is a 400 naming the parameter; offsets past ±15:59 say the range', async (t) => {
  const malformed = [
    '',
    '2026-11-21',
    '2026-11-21T10:00Z',
    '2026-11-21T10:00:00',
    '2026-11-21 10:00:00Z',
    ' 2026-11-21T10:00:00Z',
    '2026-11-21T10:00:00Z ',
    '2026-11-21T10:00:00.Z',
    '2026-11-21T10:00:00.1234567Z',
    '2026-11-21T10:00:00,5Z',
    '2026-11-21T10:00:00+0530',
    '2026-11-21T10:00:00+05',
    '2026-11-21T10:00:00UTC',
    '26-11-21T10:00:00Z',
    '+2026-11-21T10:00:00Z',
    '0000-01-01T00:00:00Z',
    '2026-00-01T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-01-00T00:00:00Z',
    '2026-01-32T00:00:00Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T00:60:00Z',
    '2026-12-31T23:59:60Z',
    '2026-01-01T00:00:00+05:60',
    '2026-01-01T00:00:00+16:60',
    '２０２６-01-01T00:00:00Z',
    '2026-01-01T00:00:00.٣Z',
    '1767225600',
  ];
  for (const value of malformed)
    t.same(
      problemOf(() => parseTimestamp('createdAt[gte]', value)),
      invalidParameter('createdAt[gte]', FORMAT),
      JSON.stringify(value),
    );
  for (const value of [
    '2026-01-01T00:00:00+16:00',
    '2026-01-01T00:00:00-16:00',
    '2026-01-01T00:00:00.5+23:59',
    '2026-01-01T00:00:00-99:00',
  ]) {
    t.same(
      problemOf(() => parseTimestamp('after', value)),
      invalidParameter('after', OFFSET),
      value,
    );
  }
});

t.test('isTimestampText: only the text a cursor was written with', async (t) => {
  for (const value of ['2026-11-21T10:00:00.123456Z', '2026-11-21T10:00:00.000000+00:00', '0001-01-01T00:00:00.000000-15:59']) {
    t.ok(isTimestampText(value), value);
  }
  for (const value of [
    '2026-11-21T10:00:00Z',
    '2026-11-21T10:00:00.12345Z',
    '2026-11-21T10:00:00.1234567Z',
    '2026-11-21t10:00:00.123456Z',
    '2026-11-21T10:00:00.123456z',
    '2026-11-21T10:00:00.123456+0000',
    ' 2026-11-21T10:00:00.123456Z',
    '2026-11-21T10:00:00.123456Z\n',
    '',
    20261121,
    null,
    undefined,
    ['2026-11-21T10:00:00.123456Z'],
    { t: '2026-11-21T10:00:00.123456Z' },
  ]) {
    t.notOk(isTimestampText(value), JSON.stringify(value) ?? String(value));
  }
});

// The oracle: the proleptic Gregorian calendar, written without Date.
const isLeap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
const monthLength = (y: number, m: number) => (m === 2 ? (isLeap(y) ? 29 : 28) : [4, 6, 9, 11].includes(m) ? 30 : 31);
const two = (n: number) => String(n).padStart(2, '0');

t.test('property: accepted exactly when the fields are a real instant; normalised text is accepted and kept as is', async (t) => {
  const stamp = fc.record({
    year: fc.oneof(fc.integer({ min: 0, max: 9999 }), fc.constantFrom(0, 1, 100, 1900, 2000, 2100, 2400)),
    month: fc.integer({ min: 0, max: 13 }),
    day: fc.oneof(fc.integer({ min: 0, max: 32 }), fc.constantFrom(28, 29, 30, 31)),
    hour: fc.integer({ min: 0, max: 25 }),
    minute: fc.integer({ min: 0, max: 61 }),
    second: fc.integer({ min: 0, max: 61 }),
    fraction: fc.stringMatching(/^(\.[0-9]{1,7})?$/),
    zone: fc.oneof(
      fc.constantFrom('Z', 'z'),
      fc
        .tuple(fc.constantFrom('+', '-'), fc.integer({ min: 0, max: 24 }), fc.integer({ min: 0, max: 61 }))
        .map(([s, h, m]) => `${s}${two(h)}:${two(m)}`),
    ),
  });
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(stamp, (p) => {
        const text = `${String(p.year).padStart(4, '0')}-${two(p.month)}-${two(p.day)}T${two(p.hour)}:${two(p.minute)}:${two(p.second)}${p.fraction}${p.zone}`;
        const [, oh, om] = /^[+-](\d\d):(\d\d)$/.exec(p.zone) ?? [];
        const fieldsValid =
          p.year >= 1 &&
          p.month >= 1 &&
          p.month <= 12 &&
          p.day >= 1 &&
          p.day <= monthLength(p.year, p.month) &&
          p.hour <= 23 &&
          p.minute <= 59 &&
          p.second <= 59 &&
          p.fraction.length <= 7 &&
          (om === undefined || Number(om) <= 59);
        const offsetValid = oh === undefined || Number(oh) <= 15;
        const result = problemOf(() => parseTimestamp('before', text));
        if (!fieldsValid) return JSON.stringify(result) === JSON.stringify(invalidParameter('before', FORMAT));
        if (!offsetValid) return JSON.stringify(result) === JSON.stringify(invalidParameter('before', OFFSET));
        const normalised = parseTimestamp('before', text);
        const expected = `${text.slice(0, 19)}.${p.fraction.slice(1).padEnd(6, '0')}${/^[Zz]$/.test(p.zone) ? '+00:00' : p.zone}`;
        return (
          result === 'no error' &&
          normalised === expected &&
          isTimestampText(normalised) &&
          parseTimestamp('after', normalised) === normalised
        );
      }),
      { numRuns: 3000 },
    ),
  );
});

t.test('formatEpoch: exact decimal epoch seconds to RFC 3339 UTC, six fractional digits; undefined where RFC 3339 ends', async (t) => {
  const cases: [string, string | undefined][] = [
    ['0.000000', '1970-01-01T00:00:00.000000Z'],
    ['-0.000001', '1969-12-31T23:59:59.999999Z'],
    ['-1.000000', '1969-12-31T23:59:59.000000Z'],
    ['-1.500000', '1969-12-31T23:59:58.500000Z'],
    ['-86400.000000', '1969-12-31T00:00:00.000000Z'],
    ['-86399.999999', '1969-12-31T00:00:00.000001Z'],
    ['1735689600.123456', '2025-01-01T00:00:00.123456Z'],
    ['951782400.000000', '2000-02-29T00:00:00.000000Z'],
    ['-2203891200.000000', '1900-03-01T00:00:00.000000Z'],
    ['-11670998400.000000', '1600-02-29T00:00:00.000000Z'],
    ['-30610224000.000000', '1000-01-01T00:00:00.000000Z'],
    ['-62135596800.000000', '0001-01-01T00:00:00.000000Z'],
    ['-62135596799.999999', '0001-01-01T00:00:00.000001Z'],
    ['253402300799.999999', '9999-12-31T23:59:59.999999Z'],
    // Past RFC 3339's years, and what is not an exact epoch at all: the caller decides (a 500, never a wrong instant).
    ['-62135596800.000001', undefined],
    ['-62135596801.000000', undefined],
    ['253402300800.000000', undefined],
    ['9224318016000.000000', undefined],
    ['Infinity', undefined],
    ['-Infinity', undefined],
    ['NaN', undefined],
    ['1735689600.12346', undefined],
    ['1735689600', undefined],
    ['1735689600.1234567', undefined],
    ['+1.000000', undefined],
    ['', undefined],
  ];
  for (const [text, printed] of cases) t.equal(formatEpoch(text), printed, text || '(empty)');
});

t.test('formatEpoch against an independent oracle: BigInt microseconds and Date.UTC, for every second of year 1 to 9999', async () => {
  const min = -62135596800n;
  const max = 253402300799n;
  // Date holds milliseconds exactly; the oracle prints the second with Date and appends the microseconds.
  const oracle = (seconds: bigint, micros: number) => {
    const date = new Date(Number(seconds) * 1000);
    const year = date.getUTCFullYear();
    const iso = date.toISOString();
    const rest = iso.slice(iso.indexOf('-', year < 0 || year > 9999 ? 1 : 0));
    return `${String(year).padStart(4, '0')}${rest.slice(0, 15)}.${String(micros).padStart(6, '0')}Z`;
  };
  const epochText = (seconds: bigint, micros: number) => {
    // The way PostgreSQL prints extract(epoch …): sign, integer seconds, six digits; the value is seconds + micros / 1e6.
    const total = seconds * 1_000_000n + BigInt(micros);
    const negative = total < 0n;
    const abs = negative ? -total : total;
    return `${negative ? '-' : ''}${abs / 1_000_000n}.${String(abs % 1_000_000n).padStart(6, '0')}`;
  };
  fc.assert(
    fc.property(fc.bigInt({ min, max }), fc.integer({ min: 0, max: 999_999 }), (seconds, micros) => {
      return formatEpoch(epochText(seconds, micros)) === oracle(seconds, micros);
    }),
    { numRuns: 20_000 },
  );
});
