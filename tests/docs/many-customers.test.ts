// docs/how-to/many-customers.md stays true: its shell blocks run as written (but for the port), in order, in one
// bash, against a small database of Chinook's tables (the same names, columns, keys and indexes, a few customers'
// invoices and lines), and each command prints what the page says it prints. The page's first block loads the
// real dump, which a fresh clone does not have: the test loads its own tables in its stead.
//
// A block is cut into steps: the commands up to a run of `# ` lines, which are what they print (`…` stands for
// any text, line breaks are not compared), or up to the block's end, which print nothing the page shows.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { parseCollectionsFile } from '../../lib/collections/parse.ts';
import { scratchDatabase, scratchSession } from '../helpers/db.ts';
import { childEnv, freePort } from '../helpers/processes.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const PAGE = 'docs/how-to/many-customers.md';
const FILE = 'docs/examples/chinook.yaml';
const markdown = readFileSync(path.join(root, PAGE), 'utf8');
/** The origin the page's commands are written for; rewritten to the test service's port. */
const ORIGIN = 'localhost:3000';

/** Chinook's tables the page serves, as its dump makes them: quoted mixed-case names, keys and indexes by their names. */
const CHINOOK = `
  create table public."Customer" (
    "CustomerId" integer not null, "FirstName" varchar(40) not null, "LastName" varchar(20) not null,
    "Company" varchar(80), "Address" varchar(70), "City" varchar(40), "State" varchar(40), "Country" varchar(40),
    "PostalCode" varchar(10), "Phone" varchar(24), "Fax" varchar(24), "Email" varchar(60) not null, "SupportRepId" integer,
    constraint "PK_Customer" primary key ("CustomerId"));
  create table public."Invoice" (
    "InvoiceId" integer not null, "CustomerId" integer not null, "InvoiceDate" timestamp without time zone not null,
    "BillingAddress" varchar(70), "BillingCity" varchar(40), "BillingState" varchar(40), "BillingCountry" varchar(40),
    "BillingPostalCode" varchar(10), "Total" numeric(10,2) not null,
    constraint "PK_Invoice" primary key ("InvoiceId"),
    constraint "FK_InvoiceCustomerId" foreign key ("CustomerId") references public."Customer" ("CustomerId"));
  create table public."Track" (
    "TrackId" integer not null, "Name" varchar(200) not null, "AlbumId" integer, "MediaTypeId" integer not null,
    "GenreId" integer, "Composer" varchar(220), "Milliseconds" integer not null, "Bytes" integer,
    "UnitPrice" numeric(10,2) not null,
    constraint "PK_Track" primary key ("TrackId"));
  create table public."InvoiceLine" (
    "InvoiceLineId" integer not null, "InvoiceId" integer not null, "TrackId" integer not null,
    "UnitPrice" numeric(10,2) not null, "Quantity" integer not null,
    constraint "PK_InvoiceLine" primary key ("InvoiceLineId"),
    constraint "FK_InvoiceLineInvoiceId" foreign key ("InvoiceId") references public."Invoice" ("InvoiceId"),
    constraint "FK_InvoiceLineTrackId" foreign key ("TrackId") references public."Track" ("TrackId"));
  create index "IFK_CustomerSupportRepId" on public."Customer" using btree ("SupportRepId");
  create index "IFK_InvoiceCustomerId" on public."Invoice" using btree ("CustomerId");
  create index "IFK_InvoiceLineInvoiceId" on public."InvoiceLine" using btree ("InvoiceId");
  create index "IFK_InvoiceLineTrackId" on public."InvoiceLine" using btree ("TrackId");
  create index "IFK_TrackAlbumId" on public."Track" using btree ("AlbumId");
  create index "IFK_TrackGenreId" on public."Track" using btree ("GenreId");
  create index "IFK_TrackMediaTypeId" on public."Track" using btree ("MediaTypeId");

  insert into public."Customer" ("CustomerId", "FirstName", "LastName", "City", "Country", "Email", "SupportRepId") values
    (1, 'Luís', 'Gonçalves', 'São José dos Campos', 'Brazil', 'luisg@embraer.com.br', 3),
    (2, 'Leonie', 'Köhler', 'Stuttgart', 'Germany', 'leonekohler@surfeu.de', 5),
    (7, 'Astrid', 'Gruber', 'Vienne', 'Austria', 'astrid.gruber@apple.at', 5),
    (8, 'Daan', 'Peeters', 'Brussels', 'Belgium', 'daan_peeters@apple.be', 4),
    (9, 'Kara', 'Nielsen', 'Copenhagen', 'Denmark', 'kara.nielsen@jubii.dk', 4);
  insert into public."Invoice" ("InvoiceId", "CustomerId", "InvoiceDate", "BillingCity", "BillingCountry", "Total") values
    (1, 2, '2009-01-01', 'Stuttgart', 'Germany', 1.98), (2, 1, '2009-01-02', 'São José dos Campos', 'Brazil', 3.96),
    (3, 8, '2009-01-03', 'Brussels', 'Belgium', 5.94), (55, 8, '2009-08-24', 'Brussels', 'Belgium', 0.99),
    (56, 9, '2009-09-06', 'Copenhagen', 'Denmark', 1.98), (78, 7, '2009-12-08', 'Vienne', 'Austria', 1.98),
    (79, 9, '2009-12-09', 'Copenhagen', 'Denmark', 3.96), (89, 7, '2010-01-18', 'Vienne', 'Austria', 18.86),
    (101, 9, '2010-03-13', 'Copenhagen', 'Denmark', 5.94), (144, 7, '2010-09-18', 'Vienne', 'Austria', 8.91),
    (153, 9, '2010-11-01', 'Copenhagen', 'Denmark', 0.99), (176, 8, '2011-02-15', 'Brussels', 'Belgium', 1.98),
    (187, 8, '2011-03-28', 'Brussels', 'Belgium', 13.86), (242, 8, '2011-11-26', 'Brussels', 'Belgium', 8.91),
    (273, 7, '2012-04-24', 'Vienne', 'Austria', 1.98), (274, 9, '2012-04-24', 'Copenhagen', 'Denmark', 1.98),
    (285, 9, '2012-06-04', 'Copenhagen', 'Denmark', 13.86), (296, 7, '2012-07-27', 'Vienne', 'Austria', 3.96),
    (318, 7, '2012-10-29', 'Vienne', 'Austria', 5.94), (340, 9, '2013-02-02', 'Copenhagen', 'Denmark', 8.91),
    (370, 7, '2013-06-19', 'Vienne', 'Austria', 0.99), (371, 8, '2013-07-02', 'Brussels', 'Belgium', 1.98),
    (394, 8, '2013-10-04', 'Brussels', 'Belgium', 3.96);
  insert into public."Track" values
    (1, 'For Those About To Rock (We Salute You)', 1, 1, 1, 'Angus Young, Malcolm Young, Brian Johnson', 343719, 11170334, 0.99),
    (2, 'Balls to the Wall', 2, 2, 1, null, 342562, 5510424, 0.99),
    (3, 'Fast As a Shark', 3, 2, 1, 'F. Baltes, S. Kaufman, U. Dirkscneider & W. Hoffman', 230619, 3990994, 0.99),
    (2554, 'Soldier Side - Intro', 207, 1, 3, 'Dolmayan, John/Malakian, Daron/Odadjian, Shavo', 63764, 2056079, 0.99),
    (2556, 'Revenga', 207, 1, 3, 'Tankian, Serj', 228127, 7503805, 0.99);
  insert into public."InvoiceLine" values
    (1, 1, 2, 0.99, 1), (2, 2, 3, 0.99, 1), (3, 3, 1, 0.99, 1), (4, 3, 2554, 0.99, 1), (5, 56, 2556, 0.99, 2),
    (419, 78, 2554, 0.99, 1), (420, 78, 2556, 0.99, 1), (421, 89, 1, 0.99, 1);`;

interface Step {
  /** 1-based line of the page where the step's last command starts: the one whose output the page shows. */
  readonly line: number;
  /** That command's first line. */
  readonly command: string;
  readonly code: string;
  /** What the page says the commands print; undefined where it shows nothing. */
  readonly expected: string | undefined;
}

/** The ```sh blocks of the page, each as its lines with their line numbers. */
function shellBlocks(text: string): { line: number; text: string }[][] {
  const blocks: { line: number; text: string }[][] = [];
  let open: { line: number; text: string }[] | undefined;
  let fenced = false;
  text.split('\n').forEach((line, index) => {
    const fence = /^```\s*(\S*)/.exec(line);
    if (fence) {
      if (fenced) {
        if (open) blocks.push(open);
        open = undefined;
        fenced = false;
      } else {
        fenced = true;
        if (fence[1] === 'sh') open = [];
      }
      return;
    }
    open?.push({ line: index + 1, text: line });
  });
  return blocks;
}

/** A block's steps: commands, then the `# ` lines of what they print. */
function stepsOf(block: { line: number; text: string }[]): Step[] {
  const steps: Step[] = [];
  let code: { line: number; text: string }[] = [];
  let printed: string[] = [];
  const close = () => {
    // A command starts at the line's start; the lines of a quoted SQL statement are indented.
    const last = [...code].reverse().find((line) => /^\S/.test(line.text)) ?? code[0];
    if (last !== undefined) {
      steps.push({
        line: last.line,
        command: last.text,
        code: code.map((line) => line.text).join('\n'),
        expected: printed.length > 0 ? printed.join('\n') : undefined,
      });
    }
    code = [];
    printed = [];
  };
  for (const line of block) {
    if (/^#( |$)/.test(line.text)) printed.push(line.text.replace(/^# ?/, ''));
    else {
      if (printed.length > 0) close();
      code.push(line);
    }
  }
  close();
  return steps;
}

/** Whether `actual` is what `expected` says: `…` is any text; line breaks, carriage returns and trailing spaces are not compared. */
function printedAs(actual: string, expected: string): boolean {
  const flat = (text: string) =>
    text
      .replace(/\r/g, '')
      .split('\n')
      .map((line) => line.trimEnd())
      .join('')
      .trim();
  const pattern = flat(expected)
    .split('…')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[\\s\\S]*?');
  return new RegExp(`^${pattern}$`).test(flat(actual));
}

t.test('the page shows docs/examples/chinook.yaml in full, and the file is a collections file', async (t) => {
  const file = readFileSync(path.join(root, FILE), 'utf8');
  t.match(markdown, `\`\`\`yaml\n${file}\`\`\``, 'the same text, in a yaml block');
  const parsed = parseCollectionsFile(file, FILE);
  t.same(
    parsed.collections.map((collection) => collection.name),
    ['tracks', 'invoices', 'invoice-lines'],
  );
});

t.test('every command of the page runs as written and prints what the page shows', async (t) => {
  const blocks = shellBlocks(markdown);
  t.match(blocks[0]?.map((line) => line.text).join('\n'), /psql -q -d chinook -f chinook\.sql/, 'the first block loads the dump');
  const steps = blocks.slice(1).flatMap(stepsOf);
  t.ok(steps.length >= 25, `${steps.length} steps`);

  const database = await scratchDatabase(t);
  const sql = scratchSession(t, database.url);
  await sql.unsafe(CHINOOK);

  // Inside the repository, as the page's reader is: npm finds its scripts, node the jose package.
  mkdirSync(path.join(root, '.data'), { recursive: true });
  const cwd = mkdtempSync(path.join(root, '.data', 'many-customers-'));
  const home = mkdtempSync(path.join(root, '.data', 'many-customers-home-'));
  t.teardown(() => {
    rmSync(cwd, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });
  const port = await freePort();
  const marker = (index: number) => `@@step ${index} `;
  const script = [
    'exec 2>&1',
    ...steps.flatMap((step, index) => [step.code.replaceAll(ORIGIN, `localhost:${port}`), `printf '\\n${marker(index)}%s@@\\n' "$?"`]),
  ].join('\n');

  // Its own process group, so that the service the page starts in the background goes with it, whatever happens.
  const shell = spawn('bash', ['-c', script], {
    cwd,
    env: childEnv({ HOME: home, DATABASE_URL: database.url, PORT: String(port) }),
    detached: true,
  });
  const stopGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-shell.pid!, signal);
    } catch {
      // gone already
    }
  };
  t.teardown(() => stopGroup('SIGKILL'));
  let output = '';
  shell.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  // The page runs in well under a minute; a service that never gets ready would keep its loop waiting.
  const timer = setTimeout(() => stopGroup('SIGTERM'), 120_000);
  const code = await new Promise<number | null>((resolve) => shell.on('close', resolve));
  clearTimeout(timer);
  const log = path.join(cwd, 'service.log');
  t.equal(code, 0, 'the shell ends well', {
    output: output.slice(-3000),
    service: existsSync(log) ? readFileSync(log, 'utf8').slice(-3000) : '',
  });

  let rest = output;
  for (const [index, step] of steps.entries()) {
    const where = `${PAGE}:${step.line}: ${step.command.slice(0, 100)}`;
    const at = rest.indexOf(`\n${marker(index)}`);
    if (at === -1) {
      t.fail(`${where}: never finished`, { output: rest.slice(-3000) });
      break;
    }
    const printed = rest.slice(0, at);
    const end = rest.indexOf('@@\n', at);
    const status = Number(rest.slice(at + 1 + marker(index).length, end));
    rest = rest.slice(end + 3);
    // The one command the page shows failing: check before the indexes the rule needs exist.
    const fails = step.expected?.includes('cannot be served') ?? false;
    t.equal(status !== 0, fails, `${where}: exits ${fails ? 'with an error' : '0'}`, { printed });
    const expected = step.expected?.replaceAll(ORIGIN, `localhost:${port}`);
    if (expected !== undefined) t.ok(printedAs(printed, expected), `${where}: prints what the page shows`, { printed, expected });
  }
});
