// The document of a team's collections (a collections file over tests/helpers/team-tables.ts's tables) describes
// each field with its real type, as items print it (docs/reference/api.md, "Values"): it validates as OpenAPI 3.1 and lints
// clean, every item of every chunk of every collection and variant validates against its item schema, what items
// never print is refused, every parameter is typed by its field and taken; `npm run client:types -- --from` types a
// client that walks file collections to the end; /docs renders the collections in headless Chromium.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { validate } from '@readme/openapi-parser';
import t from 'tap';
import { loadCursorSecret } from '../../lib/pagination/cursor-secret.ts';
import type { Collection, VariantName } from '../../lib/pagination/registry.ts';
import { loadRegistry } from '../../lib/pagination/runtime.ts';
import { variantParams } from '../../lib/pagination/variant-params.ts';
import { buildApp } from '../../lib/service/app.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { ADMIN_TOKEN, pathOf } from '../helpers/app.ts';
import { launchChromium } from '../helpers/browser.ts';
import { testDatabase } from '../helpers/db.ts';
import { setTier } from '../helpers/limiter.ts';
import { lintsClean, run } from '../helpers/linters.ts';
import { listening } from '../helpers/listening.ts';
import { documentChecker } from '../helpers/openapi.ts';
import { FILE, FIXTURE } from '../helpers/team-tables.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Each collection's relation, to count its rows. */
const RELATIONS: Record<string, string> = {
  things: 'team.things',
  shows: 'team.shows',
  show_titles: 'team.show_titles',
  show_titles_by_year: 'team.show_titles',
  playlist_track: 'team.playlist_track',
  Album: '"Music"."Album"',
  payments: 'team.payments',
  oddities: 'team.oddities',
};

/** The first request of each variant's walk: time both ways, in the time field's own form. */
function firstQueries(collection: Collection, variant: VariantName): string[] {
  const local = collection.fields.get(collection.timeField ?? '')?.type === 'localTimestamp';
  const zone = local ? '' : 'Z';
  switch (variant) {
    case 'offset':
      return ['limit=7'];
    case 'page':
      return ['page=0&page-size=7'];
    case 'cursor':
      return ['page-size=7'];
    case 'time':
      return [`before=2999-01-01T00:00:00${zone}&page-size=7`, `after=1000-01-01T00:00:00${zone}&page-size=7`];
  }
}

/** What a parameter's schema offers to send: an enum's values, both booleans, its example, or its least value. */
function valuesOf(schema: any): unknown[] {
  if (schema.enum) return schema.enum;
  if (schema.type === 'boolean') return [true, false];
  return [schema.examples?.[0] ?? schema.minimum ?? 1];
}

/** The parameters that make a request pick a variant other than the collection's default, to send one of its own beside. */
const SELECTS: Record<VariantName, string> = { offset: 'limit=5&', page: 'page=0&', cursor: 'page-size=5&', time: '' };
/** The parameters that pick a variant themselves. */
const SELECTING = new Set(Object.values(variantParams).flatMap((entry) => entry.selects as readonly string[]));

t.test('a collections file’s document, items, parameters, typed client and docs page', async (t) => {
  const database = await testDatabase(t);
  await database.sql.unsafe(FIXTURE);
  const registry = await loadRegistry(database.sql, FILE, 'collections.yaml', { schemas: ['team', 'Music'], serviceSchema: 'service' });
  const config = parseConfig({ ADMIN_TOKEN });
  const cursorSecret = await loadCursorSecret(database.drizzle, config.cursorSecret);
  // The limiter in front, as served: its headers are in the document; an allowance no walk here uses up.
  const app = buildApp({ database, config, registry, cursorSecret, rateLimit: { housekeepingMs: 0 }, remoteAddress: () => '192.0.2.1' });
  await setTier(database.sql, 'anonymous', { allowance: 1_000_000, windowSeconds: 60, concurrency: 10 });
  const get = (url: string) => app.request(`http://test.local${url}`);
  const document: any = await (await get('/openapi.json')).json();
  const schemas = document.components.schemas;
  const checker = documentChecker(document);

  t.test('the document validates as OpenAPI 3.1, every schema compiles, and the linters find nothing', async (t) => {
    const result = await validate(structuredClone(document));
    t.same(result, { valid: true, warnings: [], specification: 'OpenAPI' }, 'valid, no warning');
    for (const name of Object.keys(schemas)) t.doesNotThrow(() => checker.validate(name, {}), `${name} compiles`);
    await lintsClean(t, document);
  });

  t.test('each field is described with its column’s type, as items print it', async (t) => {
    const things = schemas.ThingsItem.properties;
    t.same(things.mood.enum, ['happy', 'sad', 'meh', null], "an enum's labels, and null for a nullable column");
    t.match(things.mood.description, /^team\.mood: one of its labels$/);
    t.same(things.id, {
      type: 'string',
      format: 'uuid',
      pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$',
      description: 'uuid: lower case',
    });
    t.match(things.big, { type: 'integer', format: 'int64' }, 'int8: an integer, no rounded bound');
    t.notOk('maximum' in things.big);
    t.match(things.small, { type: 'integer', minimum: -32768, maximum: 32767 });
    t.match(things.rank, { type: ['integer', 'null'], minimum: -(2 ** 31), maximum: 2 ** 31 - 1 });
    t.same(things.day.anyOf, [
      { type: 'string', format: 'date' },
      { type: 'string', pattern: '^(?:\\d{4,}-\\d{2}-\\d{2} BC|\\d{5,}-\\d{2}-\\d{2}|-?infinity)$' },
      { type: 'null' },
    ]);
    t.same(things.score.anyOf, [{ type: 'number' }, { type: 'string', enum: ['NaN', 'Infinity', '-Infinity'] }, { type: 'null' }]);
    t.match(things.code, { type: ['string', 'null'], minLength: 4, maxLength: 4, description: /^character\(4\): padded/ });
    t.match(things.clock_tz, { pattern: /\[\+-\]/, description: /^time\(6\) with time zone|^time with time zone/ });
    t.match(
      things.tags,
      { type: ['array', 'null'], items: { anyOf: [{ type: ['string', 'null'] }, { type: 'array' }] } },
      'a text[] nests its rows',
    );
    t.same(things.days.items.anyOf.at(-1), { type: 'null' }, 'a date[] is flattened: its items are dates or null');
    t.same(things.doc, { description: 'jsonb: any JSON value: the document itself, numbers written as stored' });

    const odd = schemas.OdditiesItem.properties;
    t.match(odd.released, { type: ['integer', 'null'], minimum: -(2 ** 31), description: 'team.year (a domain over integer)' });
    t.match(odd.nick, { type: ['string', 'null'], maxLength: 8, description: /^team\.nick \(a domain over character varying\(8\)\)/ });
    t.same(odd.price.anyOf.slice(0, 2), [{ type: 'number' }, { type: 'string', enum: ['NaN'] }], 'numeric(7,2) holds no infinity');
    t.match(
      odd.price.description,
      "numeric(7,2): exact: a JSON number written from PostgreSQL's text, every digit and trailing zero kept, at most 7 digits, 2 of them after the point",
    );
    const int4 = { type: ['integer', 'null'], minimum: -(2 ** 31), maximum: 2 ** 31 - 1 };
    let rows = odd.grid.items;
    for (let dimension = 1; dimension < 6; dimension++) {
      t.same(rows.anyOf[0], int4, `an int[]'s elements or, to the sixth dimension, its rows: ${dimension}`);
      rows = rows.anyOf[1].items;
    }
    t.same(rows, int4, 'elements at the sixth');
    t.match(odd.blob, { type: ['string', 'null'], pattern: '^\\\\x[0-9a-f]*$' });
    t.match(schemas.PlaylistTrackItem.properties.added, { type: 'string', pattern: /T/ }, 'a timestamp without time zone');
    t.match(schemas.AlbumItem.properties.title, { type: ['string', 'null'], maxLength: 160 });
  });

  t.test('every item of every chunk of every collection and variant validates against its item schema', async (t) => {
    for (const collection of registry.values()) {
      const [{ n: rows }] = (await database.sql.unsafe(`select count(*)::int as n from ${RELATIONS[collection.name]}`)) as any;
      const itemName = document.paths[`/v1/${collection.name}`].get.responses['200'].content['application/json'].schema.oneOf[0].$ref
        .split('/')
        .at(-1)
        .replace(/[A-Z][a-z]*Chunk$/, 'Item');
      for (const variant of collection.variants) {
        for (const query of firstQueries(collection, variant)) {
          const errors: string[] = [];
          let items = 0;
          let url: string | undefined = `/v1/${collection.name}?${query}`;
          for (let chunks = 0; url !== undefined; chunks++) {
            if (chunks > 100) throw new Error(`no end to ${query}`);
            const res = await get(url);
            const body: any = await res.json();
            const result = checker.check('GET', `/v1/${collection.name}`, { status: res.status, headers: res.headers, body });
            errors.push(...result.errors.map((error) => `${url}: ${error}`));
            if (!result.matched?.endsWith(`${variant[0]!.toUpperCase()}${variant.slice(1)}Chunk`)) {
              errors.push(`${url}: matched ${result.matched}`);
            }
            for (const item of body[collection.name] ?? []) {
              errors.push(...checker.validate(itemName, item).map((error) => `${url}: ${JSON.stringify(item)}: ${error}`));
              items++;
            }
            url = body._links?.next && pathOf(body._links.next.href);
          }
          t.same(errors, [], `${collection.name} ${query}: every chunk and item as documented`);
          t.equal(items, rows, `${collection.name} ${query}: walked to the end, ${rows} items`);
        }
      }
    }
  });

  t.test('the item schemas refuse what items never print', async (t) => {
    const edge = (await (await get('/v1/things?id=00000000-0000-0000-0000-000000000001')).json()).things[0];
    t.same(checker.validate('ThingsItem', edge), [], 'the edge row as printed');
    const wrong: Record<string, unknown[]> = {
      id: ['00000000-0000-0000-0000-00000000000A', 'nope'],
      label: [null],
      rank: [2 ** 31, 1.5, '1'],
      big: [1.5, '1'],
      small: [40000],
      score: ['nan', '1.5'],
      flag: ['true'],
      day: ['2024-02-30', '2024-1-1', 'infinity BC'],
      at_local: ['2024-01-01T00:00:00Z', '2024-01-01T00:00:00.1'],
      at_utc: ['2024-01-01T00:00:00Z', '0044-03-15T00:00:00Z BC', 'Infinity', '2024-01-01T00:00:00.000000+00:00'],
      clock: ['10:00', '10:00:00+02'],
      clock_tz: ['10:00:00'],
      span: ['P1D', '1 day'],
      mood: ['angry'],
      tags: ['a', [1]],
      nums: [['1'], [1.5]],
      days: [['2024-02-30']],
      code: ['abc', 'abcde'],
    };
    for (const [field, values] of Object.entries(wrong)) {
      for (const value of values) {
        t.not(
          checker.validate('ThingsItem', { ...edge, [field]: value }).length,
          0,
          `things.${field} = ${JSON.stringify(value)} is refused`,
        );
      }
    }
    const odd = (await (await get('/v1/oddities?limit=1')).json()).oddities[0];
    t.same(checker.validate('OdditiesItem', odd), []);
    const wrongOdd: Record<string, unknown[]> = {
      released: [1.5, '2000'],
      nick: ['ninechars'],
      price: ['Infinity', '-Infinity'],
      grid: [[['x']], [[1.5]], 'x'],
      stamps: [['2024-01-01'], ['2024-01-01T00:00:00Z']],
      moods: [['angry']],
      blob: ['0102', '\\x0G', '\\X01'],
    };
    for (const [field, values] of Object.entries(wrongOdd)) {
      for (const value of values) {
        t.not(
          checker.validate('OdditiesItem', { ...odd, [field]: value }).length,
          0,
          `oddities.${field} = ${JSON.stringify(value)} is refused`,
        );
      }
    }
    const nested = {
      ...odd,
      grid: [[1, null], [[2]], null],
      stamps: ['infinity', '0044-03-15T12:00:00.000000Z BC', null],
      docs: [[1], null],
    };
    t.same(checker.validate('OdditiesItem', nested), [], 'nested rows, NULL elements, dates RFC 3339 cannot write');
  });

  t.test('every parameter is typed by its field: its example is taken, and a value its schema refuses is refused', async (t) => {
    for (const collection of registry.values()) {
      const path = `/v1/${collection.name}`;
      const parameters: any[] = document.paths[path].get.parameters.filter((p: any) => p.in === 'query' && p.name !== 'cursor');
      for (const parameter of parameters) {
        const variants: VariantName[] = parameter['x-variants'];
        const select = variants.includes(collection.defaultVariant) || SELECTING.has(parameter.name) ? '' : SELECTS[variants[0]!];
        for (const value of valuesOf(parameter.schema)) {
          t.same(checker.validate(parameter.schema, value), [], `${collection.name}: ${parameter.name}=${value} fits its own schema`);
          const res = await get(`${path}?${select}${encodeURIComponent(parameter.name)}=${encodeURIComponent(String(value))}`);
          t.equal(res.status, 200, `${collection.name} takes ${parameter.name}=${value}`, { body: await res.text() });
        }
      }
    }
    const param = (collection: string, name: string) =>
      document.paths[`/v1/${collection}`].get.parameters.find((p: any) => p.name === name)?.schema;
    t.same(param('things', 'mood').enum, ['happy', 'sad', 'meh'], 'an enum filter takes its labels');
    t.match(param('things', 'day[lt]'), { type: 'string', format: 'date' }, 'lt on a date is a date');
    t.same(param('things', 'rank[isnull]'), { type: 'boolean' });
    t.match(
      param('oddities', 'since_id').anyOf,
      [{ type: 'integer', minimum: 0, format: 'int64' }, { type: 'string' }],
      'since_id over an int8 key',
    );
    t.notOk(param('things', 'since_id'), 'no since_id over a uuid key');
    t.match(
      param('playlist_track', 'before'),
      { pattern: /\[Tt \]/, examples: ['2024-01-02T10:00:00.000001'] },
      'before a timestamp without time zone',
    );
    t.match(param('payments', 'before'), { format: 'date-time' });

    const refused: [string, string, string][] = [
      ['things', 'mood', 'angry'],
      ['things', 'mood[in]', 'happy,angry'],
      ['things', 'id', 'nope'],
      ['things', 'id[in]', '00000000-0000-0000-0000-000000000001,x'],
      ['things', 'rank[in]', '1,x'],
      ['things', 'big', '1.5'],
      ['things', 'score[gt]', '1.2.3'],
      ['things', 'day[gte]', '2024-02-30'],
      ['things', 'at_local[gte]', '2024-01-01T00:00:00Z'],
      ['things', 'clock_tz[lt]', '10:00'],
      ['things', 'span[gt]', 'P1X'],
      ['oddities', 'released[in]', '2000,x'],
      ['playlist_track', 'before', '2024-03-01T10:00:00Z'],
    ];
    for (const [collection, name, value] of refused) {
      t.not(checker.validate(param(collection, name), value).length, 0, `${collection}: ${name}=${value} does not fit its schema`);
      const res = await get(`/v1/${collection}?${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
      t.equal(res.status, 400, `${collection}: ${name}=${value} is a 400`);
      t.equal((await res.json()).invalid_params?.[0]?.name, name, 'naming it');
    }
  });

  t.test('npm run client:types -- --from types a client of the running service that walks its collections to the end', async (t) => {
    const base = await listening(t, app);
    mkdirSync(path.join(root, '.data'), { recursive: true });
    // Inside the repository, so that the program imports the client by its package name, as a team's would.
    const folder = mkdtempSync(path.join(root, '.data', 'team-client-'));
    t.teardown(() => rmSync(folder, { recursive: true, force: true }));
    const types = path.join(folder, 'openapi.ts');
    const generated = await run(process.execPath, ['scripts/client-types.ts', '--from', `${base}/openapi.json`, '--out', types], root);
    t.equal(generated.code, 0, 'client:types --from exits 0', generated);
    const program = path.join(folder, 'walk.ts');
    writeFileSync(
      program,
      `import { createClient, type Item } from 'paginated-collections/client';
import type { paths } from './openapi.ts';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const same = <A, B>(_: Equal<A, B>) => {};
type Thing = Item<'things', paths>;
same<Thing['mood'], 'happy' | 'sad' | 'meh' | null>(true);
same<Thing['score'], number | 'NaN' | 'Infinity' | '-Infinity' | null>(true);
same<Thing['flag'], boolean | null>(true);
same<Thing['days'], (string | null)[] | null>(true);
same<Item<'oddities', paths>['price'], number | 'NaN' | null>(true);

const client = createClient<paths>({ baseUrl: process.argv[2]! });
// A composite key (playlist_id, track_id), walked by cursor to the end.
const tracks: string[] = [];
for await (const track of client.list('playlist_track', { 'page-size': 7, sort: 'playlist_id' })) {
  const playlist: number = track.playlist_id;
  const added: string = track.added;
  tracks.push(\`\${playlist}|\${added}\`);
}
// A text key, filtered.
const shows: string[] = [];
for await (const show of client.list('shows', { 'page-size': 7, year: 2001 })) shows.push(show.show_id);
const moods: Thing['mood'][] = [];
for await (const thing of client.list('things', { 'mood[in]': 'happy,meh', limit: 50 })) moods.push(thing.mood);
// @ts-expect-error: the document lists no such collection
client.list('products');
// @ts-expect-error: mood takes its labels only
client.list('things', { mood: 'angry' });
// @ts-expect-error: playlist_id is a number
const wrong: string = ({} as Item<'playlist_track', paths>).playlist_id;
console.log(JSON.stringify({ tracks, shows, moods, wrong: typeof wrong }));
`,
    );
    const tsc = path.join(root, 'node_modules', '.bin', 'tsc');
    const checked = await run(
      tsc,
      [
        '--noEmit',
        '--strict',
        '--target',
        'es2022',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--allowImportingTsExtensions',
        '--skipLibCheck',
        '--types',
        'node',
        program,
      ],
      root,
    );
    t.equal(checked.code, 0, 'the program type-checks over the generated types', { stdout: checked.stdout });

    const walked = await run(process.execPath, [program, base], root);
    t.equal(walked.code, 0, 'the program runs', { stderr: walked.stderr });
    const output = JSON.parse(walked.stdout);
    const tracks = await database.sql.unsafe(
      `select playlist_id || '|' || to_char(added, 'YYYY-MM-DD"T"HH24:MI:SS.US') as k from team.playlist_track order by playlist_id, track_id`,
    );
    t.same(
      output.tracks,
      tracks.map((row) => row.k),
      'every track once, in order',
    );
    const shows = await database.sql.unsafe(`select show_id from team.shows where year = 2001 order by show_id desc`);
    t.same(
      output.shows,
      shows.map((row) => row.show_id),
      'every show of 2001, in the default order',
    );
    const [{ n }] = (await database.sql.unsafe(`select count(*)::int as n from team.things where mood in ('happy', 'meh')`)) as any;
    t.equal(output.moods.length, n, 'every happy or meh thing');
    t.same([...new Set(output.moods)].sort(), ['happy', 'meh'], 'happy and meh things, and no other');
  });

  t.test('/docs renders the team collections: enum filters as their labels, and Try it out gets a chunk', async (t) => {
    const base = await listening(t, app);
    const browser = await launchChromium(t);
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    await page.goto(`${base}/docs`);
    for (const collection of registry.keys()) await page.locator(`#operations-collections-list_${collection}`).waitFor({ timeout: 30_000 });
    const things = page.locator('#operations-collections-list_things');
    await things.locator('.opblock-summary').first().click();
    await things.locator('.parameters').waitFor();
    const rendered = (await things.locator('.parameter__name').allTextContents()).map((name) =>
      name.replace(/\s*\*?\s*required$/, '').trim(),
    );
    for (const name of ['mood', 'mood[in]', 'day[lt]', 'rank[isnull]', 'big[gt]', 'clock_tz[lt]'])
      t.ok(rendered.includes(name), `${name} is rendered (of ${rendered.join(', ')})`);
    await things.locator('.try-out__btn').click();
    const mood = things.locator('tr[data-param-name="mood"] select');
    t.same(
      (await mood.locator('option').allTextContents()).filter((label) => label !== '--'),
      ['happy', 'sad', 'meh'],
      'mood: a choice of its labels',
    );
    await mood.selectOption('meh');
    await things.locator('tr[data-param-name="page-size"] input').fill('3');
    await things.locator('button.execute').click();
    const live = things.locator('.live-responses-table tr.response');
    await live.waitFor({ timeout: 30_000 });
    t.equal((await live.locator('.response-col_status').textContent())?.trim(), '200', 'Try it out: 200');
    const body = JSON.parse((await live.locator('.highlight-code pre').first().textContent()) ?? '');
    t.equal(body.things.length, 3, 'a chunk of three things');
    t.same(
      body.things.map((thing: any) => thing.mood),
      ['meh', 'meh', 'meh'],
      'each meh',
    );
    t.same(problems, [], 'no script error');
  });
});
