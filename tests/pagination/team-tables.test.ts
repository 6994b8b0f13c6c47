// A team's own tables served from a collections file (issue 40): uuid, text and composite keys, nullable sort keys
// with NULLs, mixed-case names, every common type printed exactly, a view, a partitioned table, another schema. Each
// collection is walked to the end in every variant, every row exactly once against a plain SELECT of the table.
import t, { type Test } from 'tap';
import { readCatalog } from '../../lib/catalog/read.ts';
import { parseCollectionsFile } from '../../lib/collections/parse.ts';
import { resolveCollections } from '../../lib/collections/resolve.ts';
import { loadCursorSecret } from '../../lib/pagination/cursor-secret.ts';
import { encodeCursor } from '../../lib/pagination/cursor-token.ts';
import { collectionOf, loadRegistry } from '../../lib/pagination/runtime.ts';
import { buildApp } from '../../lib/service/app.ts';
import { parseConfig } from '../../lib/service/config.ts';
import { ADMIN_TOKEN, pathOf } from '../helpers/app.ts';
import { type TestDatabase, testDatabase } from '../helpers/db.ts';
import { FILE, FIXTURE } from '../helpers/team-tables.ts';
import { followNext } from '../helpers/walk.ts';

type Item = Record<string, unknown>;

interface Served {
  database: TestDatabase;
  secret: string;
  get(path: string): Promise<{ status: number; text: string; body: any }>;
}

const rawJson = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;
/** A body with every number kept as its text, so that a re-stringified item is exactly what was sent. */
function exactParse(text: string): any {
  return (JSON.parse as (text: string, reviver: (key: string, value: unknown, context: { source?: string }) => unknown) => unknown)(
    text,
    (_key, value, context) => (typeof value === 'number' ? rawJson(context.source!) : value),
  );
}

async function serve(t: Test): Promise<Served> {
  const database = await testDatabase(t);
  await database.sql.unsafe(FIXTURE);
  const registry = await loadRegistry(database.sql, FILE, 'collections.yaml', { schemas: ['team', 'Music'], serviceSchema: 'service' });
  const config = parseConfig({ ADMIN_TOKEN });
  const secret = await loadCursorSecret(database.drizzle, config.cursorSecret);
  const app = buildApp({ database, config, registry, cursorSecret: secret, rateLimit: false });
  return {
    database,
    secret,
    async get(path) {
      const res = await app.request(`http://test.local${path}`);
      const text = await res.text();
      return { status: res.status, text, body: exactParse(text) };
    },
  };
}

/** The items of a walk along `next` from `first`. */
async function walk(served: Served, collection: string, first: string): Promise<Item[]> {
  const chunks = await followNext(first, (path) => served.get(path), 200);
  return chunks.flatMap((chunk) => chunk[collection]);
}

const keyText = (item: Item, key: readonly string[]) => key.map((field) => JSON.stringify(item[field])).join('|');

/** The keys of a relation in an order, as plain SQL gives them (NULLs where PostgreSQL's default puts them). */
async function sqlKeys(served: Served, relation: string, key: readonly string[], order: string, where = 'true'): Promise<string[]> {
  const keyExpr = key.map((column) => `to_json(${column})::text`).join(` || '|' || `);
  const rows = await served.database.sql.unsafe(`select ${keyExpr} as k from ${relation} where ${where} order by ${order}`);
  return rows.map((row) => row.k as string);
}

/** `sort=-rank,label` as SQL's ORDER BY, with the key after it. */
function orderSql(sort: string, key: readonly string[], columns: Record<string, string> = {}): string {
  const keys = sort === '' ? [] : sort.split(',');
  const last = keys.at(-1)?.startsWith('-') ? ' desc' : '';
  const named = keys.map((part) => (part.startsWith('-') ? `${columns[part.slice(1)] ?? part.slice(1)} desc` : (columns[part] ?? part)));
  const present = keys.map((part) => part.replace(/^-/, ''));
  return [...named, ...key.filter((field) => !present.includes(field)).map((field) => `${columns[field] ?? field}${last}`)].join(', ');
}

/** Walks a sort in the offset, page and cursor variants: each the rows of plain SQL in its order, each once, printed alike. */
async function walkSorts(
  t: Test,
  served: Served,
  options: {
    collection: string;
    relation: string;
    key: string[];
    sorts: string[];
    columns?: Record<string, string>;
    variants?: string[];
    /** The default order (no sort), as a sort parameter would write it: the key when absent. */
    defaultOrder?: string;
  },
) {
  const { collection, relation, key, columns } = options;
  for (const sort of options.sorts) {
    const expected = await sqlKeys(
      served,
      relation,
      key.map((field) => columns?.[field] ?? field),
      orderSql(sort === '' ? (options.defaultOrder ?? '') : sort, key, columns),
    );
    const query = sort === '' ? '' : `&sort=${sort}`;
    const walks: Record<string, string> = {
      offset: `/v1/${collection}?limit=7${query}`,
      page: `/v1/${collection}?page=0&page-size=7${query}`,
      cursor: `/v1/${collection}?page-size=7${query}`,
    };
    let printed: string | undefined;
    for (const variant of options.variants ?? ['offset', 'page', 'cursor']) {
      const items = await walk(served, collection, walks[variant]!);
      t.same(
        items.map((item) => keyText(item, key)),
        expected,
        `${collection} sort=${sort || '(default)'} ${variant}: every row once, in SQL's order`,
      );
      const text = JSON.stringify(items);
      if (printed === undefined) printed = text;
      else t.equal(text, printed, `${collection} sort=${sort || '(default)'} ${variant}: items printed as the other variants print them`);
    }
  }
}

t.test('team tables', async (t) => {
  const served = await serve(t);
  const { sql } = served.database;

  t.test('every type printed exactly', async (t) => {
    const { status, text } = await served.get('/v1/things?id=00000000-0000-0000-0000-000000000001');
    t.equal(status, 200);
    const item = text.slice(text.indexOf('"things":[') + 10, text.indexOf('],"_links"'));
    t.equal(
      item,
      '{"id":"00000000-0000-0000-0000-000000000001","label":"edge","rank":3,' +
        '"score":123456789012345678901234567890.123456789012345678901234567890,"big":9223372036854775807,"small":-32768,' +
        '"ratio":"NaN","tiny":"-Infinity","flag":false,"day":"0044-03-15 BC","at_local":"2024-02-29T23:59:59.999999",' +
        '"at_utc":"2024-06-01T12:34:56.789012Z","clock":"24:00:00","clock_tz":"10:00:00.5+05:30",' +
        '"span":"P0Y-10M3DT-4H-5M-6.500000S","mood":"meh","tags":[null,"a b",""],"nums":[-9223372036854775808,null],' +
        '"days":["2020-02-29",null],"doc":{"n":null,"s":"é\\"","x":[1,1.0,12345678901234567890123]},' +
        `"search":"'a':1 'b':2","code":"ab  "}`,
    );
    const second = await served.get('/v1/things?id=00000000-0000-0000-0000-000000000002');
    t.match(
      second.text,
      '"score":"NaN","big":-9223372036854775808,"small":32767,"ratio":"Infinity","tiny":1.5e-07,"flag":true,"day":"infinity",' +
        '"at_local":"0001-01-01T00:00:00.000000","at_utc":"2024-06-01T12:34:56.789013Z","clock":"00:00:00.000001",' +
        '"clock_tz":"23:59:59-11","span":"P0Y0M0DT0H0M0.000000S","mood":"happy","tags":[],"nums":[],"days":[],"doc":[],' +
        '"search":"","code":null',
    );
  });

  t.test('every printed value reads back in PostgreSQL as the row holds it', async (t) => {
    const items = await walk(served, 'things', '/v1/things?page-size=100');
    t.equal(items.length, 62);
    const [row] = await sql.unsafe(
      `select count(*)::int as rows, count(*) filter (where
         (e->>'label') = t.label and (e->>'rank')::int is not distinct from t.rank
         and (e->>'score')::numeric is not distinct from t.score and (e->'big')::text::int8 = t.big
         and (e->>'small')::int2 = t.small and (e->>'ratio')::float8 is not distinct from t.ratio
         and (e->>'tiny')::real is not distinct from t.tiny and (e->>'flag')::bool is not distinct from t.flag
         and (e->>'day')::date is not distinct from t.day and (e->>'at_local')::timestamp is not distinct from t.at_local
         and (e->>'at_utc')::timestamptz = t.at_utc and (e->>'clock')::time is not distinct from t.clock
         and (e->>'clock_tz')::timetz is not distinct from t.clock_tz and (e->>'span')::interval is not distinct from t.span
         and (e->>'mood')::team.mood is not distinct from t.mood and (e->'tags') is not distinct from to_jsonb(t.tags)
         and (e->'nums') is not distinct from to_jsonb(t.nums) and (e->'days') is not distinct from to_jsonb(t.days)
         and (e->'doc') is not distinct from t.doc and (e->>'search')::tsvector is not distinct from t.search
         and (e->>'code')::char(4) is not distinct from t.code)::int as same
       from jsonb_array_elements($1::jsonb) e join team.things t on t.id = (e->>'id')::uuid`,
      [JSON.stringify(items)],
    );
    t.same(row, { rows: 62, same: 62 }, 'each of 62 items, every field');
  });

  t.test('uuid key, nullable sort keys with NULLs, ascending, descending and mixed', async (t) => {
    await walkSorts(t, served, {
      collection: 'things',
      relation: 'team.things',
      key: ['id'],
      sorts: ['', 'rank', '-rank', 'score', '-score', 'day,-rank', '-mood,label', '-rank,-score', 'big', '-at_utc'],
    });
  });

  t.test('the time variant: newest first to the end, and from the oldest on, with a uuid key', async (t) => {
    const older = await walk(served, 'things', '/v1/things?before=2100-01-01T00:00:00Z&page-size=6');
    t.same(
      older.map((item) => keyText(item, ['id'])),
      await sqlKeys(served, 'team.things', ['id'], 'at_utc desc, id desc'),
    );
    const newer = await walk(served, 'things', '/v1/things?after=2000-01-01T00:00:00Z&page-size=6');
    t.same(
      newer.map((item) => keyText(item, ['id'])),
      await sqlKeys(served, 'team.things', ['id'], 'at_utc, id'),
    );
    // An empty chunk's prev link takes in the item at its position.
    const last = await served.get('/v1/things?after=2000-01-01T00:00:00Z&page-size=100');
    const poll = await served.get(pathOf(last.body._links.poll.href));
    t.same(poll.body.things, []);
    const back = await served.get(pathOf(poll.body._links.prev.href));
    t.equal(back.body.things[0]?.id, newer.at(-1)!.id, 'prev of an empty chunk starts at its position, the item there included');
  });

  t.test('a cursor walk with rows inserted between chunks, NULLs among them', async (t) => {
    const uuid = (last: string) => `'00000000-0000-0000-0000-${last.padStart(12, '0')}'`;
    const insert = (id: string, rank: string) =>
      sql.unsafe(`insert into team.things (id, label, rank, big, small, at_utc) values (${id}, 'new', ${rank}, 1, 1, now())`);
    const before = new Set(await sqlKeys(served, 'team.things', ['id'], 'id'));

    // Ascending: NULLs last. After the first chunk, a rank behind the position is not seen; NULLs and later ranks are.
    const first = await served.get('/v1/things?page-size=10&sort=rank');
    await insert(uuid('a1'), '-1');
    await insert(uuid('a2'), 'null');
    await insert("'ffffffff-ffff-ffff-ffff-ffffffffffff'", 'null');
    await insert(uuid('a4'), '6');
    const rest = await walk(served, 'things', pathOf(first.body._links.next.href));
    const seen = [...first.body.things, ...rest].map((item: Item) => keyText(item, ['id']));
    t.equal(new Set(seen).size, seen.length, 'no row twice');
    const expectedAsc = new Set([
      ...before,
      ...['"00000000-0000-0000-0000-0000000000a2"', '"ffffffff-ffff-ffff-ffff-ffffffffffff"', '"00000000-0000-0000-0000-0000000000a4"'],
    ]);
    t.same(new Set(seen), expectedAsc, 'every row once; those inserted ahead too, the one behind not');
    t.same(seen, await sqlKeys(served, 'team.things', ['id'], 'rank, id', `rank is distinct from -1`), "in SQL's order");

    // Descending: NULLs first. The first chunk is all NULLs; a NULL with a greater id is behind, every value ahead.
    const now = new Set(await sqlKeys(served, 'team.things', ['id'], 'id'));
    const firstDesc = await served.get('/v1/things?page-size=10&sort=-rank');
    t.same(
      firstDesc.body.things.map((item: Item) => item.rank),
      Array(10).fill(null),
      'a full chunk of NULLs first, descending',
    );
    await insert("'fffffffe-ffff-ffff-ffff-ffffffffffff'", 'null');
    await insert(uuid('b2'), 'null');
    await insert(uuid('b3'), '100');
    await insert(uuid('b4'), '-5');
    const restDesc = await walk(served, 'things', pathOf(firstDesc.body._links.next.href));
    const seenDesc = [...firstDesc.body.things, ...restDesc].map((item: Item) => keyText(item, ['id']));
    t.equal(new Set(seenDesc).size, seenDesc.length, 'no row twice');
    t.same(
      new Set(seenDesc),
      new Set([
        ...now,
        ...['"00000000-0000-0000-0000-0000000000b2"', '"00000000-0000-0000-0000-0000000000b3"', '"00000000-0000-0000-0000-0000000000b4"'],
      ]),
      'every row once; those inserted ahead too, the one behind not',
    );
  });

  t.test('filters: isnull, in, prefix and comparisons select what SQL does', async (t) => {
    const cases: [string, string][] = [
      ['rank[isnull]=true', 'rank is null'],
      ['rank[isnull]=false', 'rank is not null'],
      ['score[isnull]=true&day[isnull]=false', 'score is null and day is not null'],
      ['rank[in]=1,3,5', 'rank in (1, 3, 5)'],
      ['rank[gte]=4', 'rank >= 4'],
      ['big[gt]=9007199254740993', 'big > 9007199254740993'],
      ['small=-40', 'small = -40'],
      ['ratio[lt]=3.5', 'ratio < 3.5'],
      ['score[gt]=5', 'score > 5'],
      ['flag=true', 'flag'],
      ['day[gte]=2020-02-01&day[lt]=2020-02-20', "day >= '2020-02-01' and day < '2020-02-20'"],
      ['at_local[gte]=2024-01-02T10:00:00', "at_local >= '2024-01-02 10:00:00'"],
      ['at_utc[gte]=2024-01-01T00:00:10%2B00:00', "at_utc >= '2024-01-01T00:00:10Z'"],
      ['clock[lt]=10:30', "clock < '10:30'"],
      ['clock_tz[lt]=10:30%2B02', "clock_tz < '10:30+02'"],
      ['span[gt]=P30D', "span > 'P30D'"],
      ['mood[in]=happy,meh', "mood in ('happy', 'meh')"],
      ['label[prefix]=label%201', "label like 'label 1%'"],
      ['code=3', "code = '3'"],
      [
        'id[in]=00000000-0000-0000-0000-000000000001,00000000-0000-0000-0000-000000000002',
        "id::text like '00000000-0000-0000-0000-00000000000_'",
      ],
    ];
    for (const [query, where] of cases) {
      const { status, body, text } = await served.get(`/v1/things?limit=100&count=exact&${query}`);
      t.equal(status, 200, `${query}: ${status === 200 ? '' : text}`);
      const expected = await sqlKeys(served, 'team.things', ['id'], 'id', where);
      t.same(
        body.things.map((item: Item) => keyText(item, ['id'])),
        expected,
        query,
      );
      t.equal(JSON.stringify(body.size), String(expected.length), `${query}: the count`);
    }
    const cursor = await walk(served, 'things', '/v1/things?page-size=4&sort=-score&score[isnull]=true&rank[isnull]=false');
    t.same(
      cursor.map((item) => keyText(item, ['id'])),
      await sqlKeys(served, 'team.things', ['id'], 'score desc, id desc', 'score is null and rank is not null'),
      'a cursor walk carries isnull filters',
    );
  });

  t.test('bad filter values are 400s naming the parameter', async (t) => {
    const bad = [
      'id=nope',
      'id[in]=00000000-0000-0000-0000-000000000001,x',
      'score[gt]=1.2.3',
      'rank=1.5',
      'small=40000',
      'big=9223372036854775808',
      'day[gte]=2024-02-30',
      'flag=yes',
      'mood=angry',
      'rank[isnull]=maybe',
      'span[gt]=P1X',
      'clock[lt]=25:00',
      'clock_tz[lt]=10:00',
      'at_local[gte]=2024-01-01T00:00:00Z',
      'at_utc[gte]=2024-01-01',
      'label[lt]=a',
    ];
    for (const query of bad) {
      const name = decodeURIComponent(query.split('=')[0]!);
      const { status, body } = await served.get(`/v1/things?${query}`);
      t.equal(status, 400, query);
      t.equal(body.invalid_params?.[0]?.name, name, `${query}: names ${name}`);
    }
    const since = await served.get('/v1/things?since_id=5');
    t.equal(since.status, 400);
    t.equal(since.body.invalid_params[0].name, 'since_id', 'since_id needs a key of one integer field');
  });

  t.test('cursors: key values of their fields types, NULL only where a field may hold it', async (t) => {
    const cursor = (payload: Record<string, unknown>) =>
      served.get(`/v1/things?cursor=${encodeCursor(served.secret, { v: 'cursor', c: 'things', f: [], ...payload })}`);
    const id = '00000000-0000-0000-0000-000000000001';
    t.equal((await cursor({ s: 'rank,id', k: [null, id] })).status, 200, 'a NULL rank');
    t.equal((await cursor({ s: 'id', k: [id] })).status, 200);
    for (const k of [[5], ['not-a-uuid'], [null]]) t.equal((await cursor({ s: 'id', k })).status, 400, JSON.stringify(k));
    for (const k of [
      ['1', id],
      [1.5, id],
      [2 ** 31, id],
    ])
      t.equal((await cursor({ s: 'rank,id', k })).status, 400, JSON.stringify(k));
    t.equal((await cursor({ s: 'big,id', k: ['9223372036854775807', id] })).status, 200, 'an int8 as its text');
    for (const k of [
      [2 ** 53 + 2, id],
      ['9223372036854775808', id],
      ['1e3', id],
      ['007', id],
    ]) {
      const { status, body } = await cursor({ s: 'big,id', k });
      t.equal(status, 400, JSON.stringify(k));
      t.equal(body.code, 'invalid_cursor', `${JSON.stringify(k)}: an invalid cursor`);
    }
    t.equal((await cursor({ s: 'rank', k: [1] })).status, 400, 'a sort without the key');
    const track = (k: unknown[]) =>
      served.get(
        `/v1/playlist_track?cursor=${encodeCursor(served.secret, { v: 'cursor', c: 'playlist_track', f: [], s: 'playlist_id,track_id', k })}`,
      );
    t.equal((await track([1, '9007199254740995'])).status, 200);
    // A safe integer is taken as a number too (the demo's cursors carried their ids so), but no number past it.
    t.equal((await track([1, 9007199254740990])).status, 200, 'an int8 key value as a safe integer');
    t.equal((await track([1, 9007199254740994])).status, 400, 'an int8 key value as a number past 2^53');
    t.equal((await track(['1', '9007199254740995'])).status, 400, 'an int4 key value as text');
  });

  t.test('a text key, with a nullable default order', async (t) => {
    await walkSorts(t, served, {
      collection: 'shows',
      relation: 'team.shows',
      key: ['show_id'],
      sorts: ['', 'year', '-year', 'show_id'],
      defaultOrder: '-year',
    });
  });

  t.test('a view with the key the file names', async (t) => {
    await walkSorts(t, served, {
      collection: 'show_titles',
      relation: 'team.show_titles',
      key: ['show_id'],
      sorts: ['', 'year', '-year'],
    });
  });

  t.test('a default order by a column that is no sort key: its cursors are taken back', async (t) => {
    await walkSorts(t, served, {
      collection: 'show_titles_by_year',
      relation: 'team.show_titles',
      key: ['show_id'],
      sorts: [''],
      defaultOrder: '-year',
    });
    t.equal((await served.get('/v1/show_titles_by_year?sort=-year')).status, 400, 'a request may not ask for it by sort');
  });

  t.test('a composite key with an int8 part past 2^53, and the time variant over a timestamp without time zone', async (t) => {
    const key = ['playlist_id', 'track_id'];
    await walkSorts(t, served, { collection: 'playlist_track', relation: 'team.playlist_track', key, sorts: ['', 'playlist_id'] });
    const older = await walk(served, 'playlist_track', '/v1/playlist_track?before=2100-01-01T00:00:00&page-size=4');
    t.same(
      older.map((item) => keyText(item, key)),
      await sqlKeys(served, 'team.playlist_track', key, 'added desc, playlist_id desc, track_id desc'),
    );
    const newer = await walk(served, 'playlist_track', '/v1/playlist_track?after=2024-03-01T10:00:00&page-size=4');
    t.same(
      newer.map((item) => keyText(item, key)),
      await sqlKeys(served, 'team.playlist_track', key, 'added, playlist_id, track_id'),
    );
    t.match(JSON.stringify(newer[0]), /"track_id":900719925474099\d,"added":"2024-03-01T10:00:00\.00000\d"/);
    const bad = await served.get('/v1/playlist_track?after=2024-03-01T10:00:00Z');
    t.equal(bad.status, 400, 'a timestamp without time zone takes no offset');
  });

  t.test('mixed-case quoted names, camelCase fields, since_id on an integer key', async (t) => {
    await walkSorts(t, served, {
      collection: 'Album',
      relation: '"Music"."Album"',
      key: ['albumId'],
      columns: { albumId: '"AlbumId"', title: '"Title"' },
      sorts: ['', 'title', '-title'],
    });
    const since = await walk(served, 'Album', '/v1/Album?since_id=10&page-size=6');
    t.same(
      since.map((item) => JSON.stringify(item.albumId)),
      Array.from({ length: 20 }, (_, at) => String(at + 11)),
      'since_id: the greater keys, ascending',
    );
    t.equal((await served.get('/v1/Album?since_id=-1')).status, 400);
  });

  t.test('an int8 key past 2^53 with since_id over it; domains, arrays of several dimensions, bytea', async (t) => {
    await walkSorts(t, served, { collection: 'oddities', relation: 'team.oddities', key: ['id'], sorts: [''] });
    const since = await walk(served, 'oddities', '/v1/oddities?since_id=9007199254741010&page-size=4');
    t.same(
      since.map((item) => keyText(item, ['id'])),
      await sqlKeys(served, 'team.oddities', ['id'], 'id', 'id > 9007199254741010'),
      'since_id: the greater keys, ascending, exactly',
    );
    const { text } = await served.get('/v1/oddities?since_id=9223372036854775806');
    t.match(
      text,
      '"oddities":[{"id":9223372036854775807,"released":2155,"nick":"exactly8","price":"NaN","grid":[[[1]],[[2]]],' +
        '"stamps":["infinity","-infinity","0044-03-15T12:00:00.000000Z BC","10000-01-01T00:00:00.000000Z"],"moods":[],"docs":[],"blob":"\\\\x"}]',
    );
  });

  t.test('collectionOf: the key, the fields, and the cost rule by field from the resolved collection', async (t) => {
    const catalog = await readCatalog(sql, { schemas: ['team', 'Music'], serviceSchema: 'service' });
    const { collections, problems } = resolveCollections(parseCollectionsFile(FILE, 'collections.yaml'), catalog, 'collections.yaml');
    t.same(problems, []);
    const album = collectionOf(collections.find((collection) => collection.name === 'Album')!);
    t.same(album.key, ['albumId']);
    t.same([...album.fields.keys()], ['albumId', 'title', 'artistId']);
    t.same(album.sortKeys, ['title']);
    t.same(album.cost, { itemsPerUnit: 50, countedPerUnit: 5_000, indexed: { albumId: 10_000, title: 1_000 }, unindexedSort: 100 });
    const things = collectionOf(collections.find((collection) => collection.name === 'things')!);
    t.equal(things.cost.indexed.at_utc, 1_000, 'the time variant’s order is priced by its index');
    t.same(collectionOf(collections.find((collection) => collection.name === 'playlist_track')!).key, ['playlist_id', 'track_id']);
    // The key follows as the tie-breaker (lib/pagination/sort.ts), so the default order is written without it.
    t.same(collectionOf(collections.find((collection) => collection.name === 'shows')!).defaultSort, [{ field: 'year', descending: true }]);
  });

  t.test('a partitioned table through its parent, in another schema', async (t) => {
    const key = ['paid_at', 'payment_id'];
    // Timestamps as items print them, for SQL's keys: the same order as the instants'.
    const columns = { paid_at: `to_char(paid_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')` };
    await walkSorts(t, served, { collection: 'payments', relation: 'team.payments', key, columns, sorts: [''] });
    const older = await walk(served, 'payments', '/v1/payments?before=2030-01-01T00:00:00Z&page-size=4');
    t.same(
      older.map((item) => keyText(item, key)),
      await sqlKeys(served, 'team.payments', [columns.paid_at, 'payment_id'], 'paid_at desc, payment_id desc'),
    );
    const index = await served.get('/v1');
    t.notOk(index.body._links.payments_2024, 'partitions are not listed');
  });
});
