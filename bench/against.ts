// `npm run bench -- --against <ref>`: a worktree of another commit, whose service is measured beside this checkout's.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServerVariant } from './processes.ts';
import type { Comparison, Scenario } from './scenario-types.ts';

const projectRoot = fileURLToPath(new URL('..', import.meta.url));

/** The server whose rows get a twin from the other commit. */
const TWINNED = 'service';

export interface Against {
  /** The ref as it was given, e.g. `HEAD~1`: the twin rows are named with it. */
  readonly ref: string;
  readonly commit: string;
  /** The worktree, a detached checkout of `commit` in a temporary directory. */
  readonly root: string;
  /** Removes the worktree; safe to call twice, and called on the process's exit if it was not. */
  remove(): void;
}

function git(args: string[]): string {
  return execFileSync('git', args, { cwd: projectRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/**
 * Checks out `ref` in a worktree of its own, with this checkout's node_modules linked in when the two install
 * the same packages (package-lock.json and the patches of patches/ the same), and with its own `npm ci`
 * otherwise, so that the other commit runs on the dependencies it was written for.
 */
export function checkoutAgainst(ref: string, log: (line: string) => void): Against {
  let commit: string;
  try {
    commit = git(['rev-parse', '--verify', '--end-of-options', `${ref}^{commit}`]);
  } catch {
    throw new Error(`Invalid --against: "${ref}" names no commit of this repository`);
  }
  const ownInstall = git(['diff', '--stat', commit, '--', 'package-lock.json', 'patches/*.patch']) !== '';
  const root = mkdtempSync(path.join(tmpdir(), 'bench-against-'));
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    process.off('exit', remove);
    // The link (or the worktree's own install) first, so that nothing below can reach into this checkout's node_modules.
    rmSync(path.join(root, 'node_modules'), { force: true, recursive: ownInstall });
    try {
      git(['worktree', 'remove', '--force', root]);
    } catch (error) {
      log(`While removing the worktree ${root}: ${(error as Error).message.split('\n')[0]}`);
    }
    rmSync(root, { recursive: true, force: true });
    git(['worktree', 'prune']);
  };
  // Also when the bench dies of an error nothing caught: all of it is synchronous, so it runs on 'exit'.
  process.once('exit', remove);
  try {
    log(`Checking out ${ref} (${commit.slice(0, 12)}) in ${root}`);
    git(['worktree', 'add', '--detach', root, commit]);
    if (ownInstall) {
      log(`${ref}'s package-lock.json or patches differ from this checkout's: npm ci in ${root}`);
      execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
    } else symlinkSync(path.join(projectRoot, 'node_modules'), path.join(root, 'node_modules'), 'dir');
  } catch (error) {
    remove();
    throw new Error(`Could not check out ${ref} in ${root}: ${(error as Error).message}`);
  }
  return { ref, commit, root, remove };
}

/** The server the twin rows run on: `service` as it is configured here, started from the worktree. */
export function twinServer(servers: ServerVariant[], against: Against): ServerVariant {
  return { ...servers.find((server) => server.name === TWINNED)!, name: `${TWINNED} [${against.ref}]`, root: against.root };
}

/**
 * The selected rows with, after each row of `service`, its twin on the worktree's service: next to each other,
 * so that the drift of the machine between the two is the least the rotation allows.
 */
export function withTwins(selected: Scenario[], twin: ServerVariant, against: Against): Scenario[] {
  return selected.flatMap((scenario) =>
    scenario.server === TWINNED
      ? [scenario, { ...scenario, name: twinName(scenario.name, against), server: twin.name, baseline: false }]
      : [scenario],
  );
}

const twinName = (name: string, against: Against) => `${name} [${against.ref}]`;

/** Each twinned row divided by its twin: this checkout's figures over the other commit's. */
export function twinComparisons(selected: Scenario[], against: Against): Comparison[] {
  return selected
    .filter((scenario) => scenario.server === TWINNED)
    .map((scenario) => ({ label: `${scenario.name}: now / ${against.ref}`, of: scenario.name, to: twinName(scenario.name, against) }));
}
