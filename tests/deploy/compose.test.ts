// compose.yaml and deploy/haproxy.cfg, without a Docker engine: HAProxy accepts its configuration, the
// instances' environment passes the service's own config parser, and the parts agree with each other.
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { parse } from 'yaml';
import { parseConfig } from '../../lib/service/config.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const compose = parse(await readFile(`${root}/compose.yaml`, 'utf8')) as { services: Record<string, any> };
const haproxyCfg = await readFile(`${root}/deploy/haproxy.cfg`, 'utf8');

/** What compose makes of `${NAME:-default}` with NAME unset. */
function interpolated(value: unknown): string {
  return String(value).replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');
}

t.test('HAProxy accepts deploy/haproxy.cfg', async (t) => {
  const check = spawnSync('/usr/sbin/haproxy', ['-c', '-f', `${root}/deploy/haproxy.cfg`], { encoding: 'utf8' });
  t.equal(check.status, 0, `haproxy -c:\n${check.stdout}${check.stderr}`);
  t.match(check.stdout + check.stderr, /Configuration file is valid/);
});

t.test('compose.yaml: PostgreSQL, two instances of this image, the balancer, in agreement', async (t) => {
  const { db, app1, app2, balancer } = compose.services;
  t.same(Object.keys(compose.services).sort(), ['app1', 'app2', 'balancer', 'db']);
  t.match(db.image, /^postgres:/);
  t.same(app2, app1, 'two identical instances');
  t.equal(app1.build, '.', 'built from the Dockerfile');
  t.equal(app1.depends_on.db.condition, 'service_healthy', 'started once PostgreSQL answers');

  const env = Object.fromEntries(Object.entries(app1.environment as Record<string, unknown>).map(([k, v]) => [k, interpolated(v)]));
  const config = parseConfig(env);
  t.equal(new URL(config.databaseUrl!).hostname, 'db', 'the database is the db service');
  t.same(config.trustProxy, { kind: 'addresses', addresses: [balancer.networks.internal.ipv4_address] }, 'the balancer alone is trusted');
  t.equal(config.adminToken, undefined, 'no admin token unless one is given');

  // The balancer marks an instance down within inter × (fall + 1); the drain period must outlast that.
  const inter = Number(/default-server inter (\d+)s/.exec(haproxyCfg)?.[1]) * 1000;
  const fall = Number(/ fall (\d+)/.exec(haproxyCfg)?.[1]);
  t.ok(inter > 0 && fall > 0, 'the checks are read from the file');
  t.ok(config.shutdownDrainMs > inter * (fall + 1), `drain ${config.shutdownDrainMs} ms > ${inter * (fall + 1)} ms to mark it down`);
  t.ok(
    Number.parseInt(app1.stop_grace_period, 10) * 1000 >= config.shutdownDrainMs + config.shutdownTimeoutMs,
    'the runtime waits for the drain and the in-flight requests before SIGKILL',
  );

  const servers = [...haproxyCfg.matchAll(/^\s*server (\S+) (\S+):(\d+) check/gm)].map((m) => [m[1], m[2], Number(m[3])]);
  t.same(servers, [
    ['app1', 'app1', 3000],
    ['app2', 'app2', 3000],
  ]);
  const dockerfile = await readFile(`${root}/Dockerfile`, 'utf8');
  t.match(dockerfile, /ENV .*\bPORT=3000\b/, "the image's port is the one HAProxy sends to");
  t.same(balancer.volumes, ['./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro']);
  t.same(balancer.ports, ['8080:8080']);
  t.match(haproxyCfg, /bind :8080/);
});
