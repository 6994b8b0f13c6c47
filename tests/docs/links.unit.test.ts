// Every link into the documentation resolves: relative Markdown links of README.md and docs/ lead to a file,
// and to a heading when they name an anchor; every `docs/<page>.md#anchor` and `docs/<page>.md, "Heading"`
// citation in the repository's code and pages names a page and a heading that exist; every path a page's
// "Code" section names exists. A page moved or a heading renamed fails here until its citations follow.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** A page's headings, as written (backticks dropped) and as anchors (repeats numbered as GitHub numbers them). */
function headingsOf(markdown: string): { texts: Set<string>; anchors: Set<string> } {
  const texts = new Set<string>();
  const anchors = new Set<string>();
  let inFence = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) inFence = !inFence;
    const heading = !inFence && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    texts.add(heading[1]!.replace(/`/g, ''));
    let anchor = slug(heading[1]!);
    for (let n = 1; anchors.has(anchor); n++) anchor = `${slug(heading[1]!)}-${n}`;
    anchors.add(anchor);
  }
  return { texts, anchors };
}

/** Markdown links and images `[text](target)` outside code, with their line numbers. */
function linksOf(markdown: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  let inFence = false;
  markdown.split('\n').forEach((text, index) => {
    if (/^\s*```/.test(text)) {
      inFence = !inFence;
      return;
    }
    if (inFence) return;
    const prose = text.replace(/`[^`]*`/g, '');
    for (const match of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) links.push({ line: index + 1, target: match[1]! });
  });
  return links;
}

interface Citation {
  readonly line: number;
  readonly page: string;
  readonly anchor: string | undefined;
  readonly headings: readonly string[];
}

/** The lines of text a citation may run over, joined: a line break and a comment's marker become one space. */
function flowed(text: string): { text: string; lineAt: (offset: number) => number } {
  const starts: number[] = [];
  let out = '';
  const lines = text.split('\n');
  lines.forEach((line, index) => {
    const body = index === 0 ? line : line.replace(/^[ \t]*(?:\/\/|\*|--|#)?[ \t]*/, '');
    if (index > 0) out += ' ';
    starts.push(out.length);
    out += body;
  });
  return {
    text: out,
    lineAt: (offset) => {
      let low = 0;
      while (low + 1 < starts.length && starts[low + 1]! <= offset) low++;
      return low + 1;
    },
  };
}

/**
 * The citations of docs pages in a file: `docs/x.md`, `docs/x.md#anchor`, and `docs/x.md, "A"`, `docs/x.md, "A", "B"`
 * or `docs/x.md, "A" and "B"`, with the line each starts on; a heading's quote may run on over a comment's next line.
 */
function citationsIn(text: string): Citation[] {
  const { text: joined, lineAt } = flowed(text);
  const pattern = /(?<![\w/.-]|\]\()(docs\/[\w./-]+\.md)(?:#([\w-]+)|,\s+((?:\\?"[^"\\]{1,120}\\?"(?:,\s+|\s+and\s+)?)+))?/g;
  return [...joined.matchAll(pattern)].map((match) => ({
    line: lineAt(match.index),
    page: match[1]!,
    anchor: match[2],
    headings: [...(match[3] ?? '').matchAll(/\\?"([^"\\]+)\\?"/g)].map((quoted) => quoted[1]!.trim()),
  }));
}

function filesUnder(folder: string, keep: (file: string) => boolean): string[] {
  const full = path.join(root, folder);
  if (!existsSync(full)) return [];
  if (statSync(full).isFile()) return keep(folder) ? [folder] : [];
  return readdirSync(full, { recursive: true, encoding: 'utf8' })
    .map((file) => path.join(folder, file))
    .filter((file) => !file.includes('node_modules') && statSync(path.join(root, file)).isFile() && keep(file));
}

const pages = ['README.md', ...filesUnder('docs', (file) => file.endsWith('.md'))];
const sources = [
  ...['lib', 'db', 'bench', 'scripts', 'demo', 'client', 'deploy', 'tests', 'patches'].flatMap((folder) =>
    filesUnder(folder, (file) => /\.(ts|sql|sh|yaml|cjs|md)$/.test(file)),
  ),
  ...['server.ts', 'server.deno.ts', 'server.bun.ts', 'Dockerfile', 'compose.yaml', 'knip.jsonc'].filter((file) =>
    existsSync(path.join(root, file)),
  ),
];

const headingCache = new Map<string, ReturnType<typeof headingsOf>>();
function headings(file: string): ReturnType<typeof headingsOf> {
  const cached = headingCache.get(file);
  if (cached) return cached;
  const found = headingsOf(readFileSync(path.join(root, file), 'utf8'));
  headingCache.set(file, found);
  return found;
}

/** What is wrong with one citation, or undefined. */
function problemOf(citation: Citation): string | undefined {
  if (!existsSync(path.join(root, citation.page))) return `${citation.page}: no such page`;
  const { texts, anchors } = headings(citation.page);
  if (citation.anchor !== undefined && !anchors.has(citation.anchor)) return `${citation.page}#${citation.anchor}: no such heading`;
  const missing = citation.headings.filter((heading) => !texts.has(heading));
  if (missing.length > 0) return `${citation.page}: no heading ${missing.map((heading) => `"${heading}"`).join(', ')}`;
  return undefined;
}

t.test('the pages are found', async (t) => {
  t.ok(pages.length >= 20, `${pages.length} pages`);
  t.ok(sources.length > 200, `${sources.length} source files`);
});

t.test('every relative link of README.md and docs/ leads to a file, and to a heading when it names one', async (t) => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of pages) {
    for (const { line, target } of linksOf(readFileSync(path.join(root, file), 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      checked++;
      const [pathPart, fragment] = target.split('#', 2) as [string, string | undefined];
      const resolved =
        pathPart === '' ? path.join(root, file) : path.resolve(path.dirname(path.join(root, file)), decodeURIComponent(pathPart));
      const relative = path.relative(root, resolved);
      if (relative.startsWith('..')) broken.push(`${file}:${line}: ${target} leads outside the repository`);
      else if (!existsSync(resolved)) broken.push(`${file}:${line}: ${target}: no such file`);
      else if (fragment && resolved.endsWith('.md') && !headings(relative).anchors.has(fragment)) {
        broken.push(`${file}:${line}: ${target}: no heading with that anchor`);
      }
    }
  }
  t.ok(checked > 100, `${checked} relative links checked`);
  t.same(broken, [], 'no broken link');
});

t.test('every citation of a docs page names a page and headings that exist', async (t) => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of [...pages, ...sources]) {
    if (file === path.join('tests', 'docs', 'links.unit.test.ts')) continue; // its own examples below
    for (const citation of citationsIn(readFileSync(path.join(root, file), 'utf8'))) {
      checked++;
      const problem = problemOf(citation);
      if (problem) broken.push(`${file}:${citation.line}: ${problem}`);
    }
  }
  t.ok(checked > 100, `${checked} citations checked`);
  t.same(broken, [], 'no stale citation');
});

t.test("every path a page's Code section names exists", async (t) => {
  const missing: string[] = [];
  for (const file of pages) {
    const text = readFileSync(path.join(root, file), 'utf8');
    const code = /\n## Code\n([\s\S]*?)(?=\n## |$)/.exec(text);
    if (!code) continue;
    for (const [, name] of code[1]!.matchAll(/`([\w.+-]+(?:\/[\w.+-]*)+|[\w-]+\.(?:ts|json|yaml|sh|cfg))`/g)) {
      if (!existsSync(path.join(root, name!))) missing.push(`${file}: ${name}`);
    }
  }
  t.same(missing, [], 'no Code section names a file that is gone');
});

t.test('the checker tells a broken citation from a good one', async (t) => {
  const [good, badHeading, badPage, split, several] = citationsIn(
    [
      '// (docs/reference/costs.md, "Statement budgets")',
      '// (docs/reference/costs.md, "No such heading")',
      '// (docs/no-such-page.md)',
      '// its budget (docs/reference/limits.md, "Who is',
      '// counted") and more',
      '-- docs/reference/costs.md, "Counts" and "Settlement"',
    ].join('\n'),
  );
  t.equal(problemOf(good!), undefined);
  t.match(problemOf(badHeading!), /no heading "No such heading"/);
  t.match(problemOf(badPage!), /no such page/);
  t.same(split!.headings, ['Who is counted']);
  t.equal(split!.line, 4);
  t.equal(problemOf(split!), undefined);
  t.same(several!.headings, ['Counts', 'Settlement']);
  t.equal(problemOf({ line: 1, page: 'docs/reference/costs.md', anchor: 'counts', headings: [] }), undefined);
  t.match(problemOf({ line: 1, page: 'docs/reference/costs.md', anchor: 'count', headings: [] }), /no such heading/);
});
