// Where the embedded PostgreSQL keeps its data: in the folder asked for whenever the server's user can
// reach it, even when that folder and its parents do not exist yet, and anew when a link to it dangles.
import { chmod, lstat, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startEmbedded } from '../../db/embedded.ts';
import { withSession } from '../helpers/db.ts';

/** A temporary folder every user can traverse (mkdtemp makes it 700), removed at teardown. */
async function reachableDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'embedded-placement-'));
  await chmod(dir, 0o755);
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function answers(url: string): Promise<number> {
  const [row] = await withSession(url, (sql) => sql`select 1 as one`);
  return row!.one as number;
}

t.test('a data folder whose parents do not exist yet is made where it was asked for, not linked elsewhere', async (t) => {
  const dataDir = path.join(await reachableDir(t), 'project', '.data', 'postgres');
  const server = await startEmbedded({ dataDir });
  t.teardown(() => server.stop());
  t.equal(await answers(server.url), 1);
  const info = await lstat(dataDir);
  t.ok(info.isDirectory() && !info.isSymbolicLink(), 'a folder of its own, not a link to a cache folder');
});

t.test('a data folder that is a link to a folder gone away starts anew instead of failing', async (t) => {
  const dir = await reachableDir(t);
  const dataDir = path.join(dir, 'postgres');
  await symlink(path.join(dir, 'cleaned-away', 'postgres'), dataDir);
  const server = await startEmbedded({ dataDir });
  t.teardown(() => server.stop());
  t.equal(await answers(server.url), 1);
  t.ok((await lstat(dataDir)).isDirectory(), 'the dangling link is replaced by the data folder');
});
