// Which errors mean "the database is away" (a 503 and Retry-After) rather than a bug (a 500); one refusal is real.
import t from 'tap';
import { isDatabaseUnavailable } from '../../lib/http/errors.ts';
import { scratchSession, serverUrl, withSession } from '../helpers/db.ts';

/** An error as postgres.js reports a server's refusal, with its SQLSTATE. */
function serverError(code: string): Error {
  return Object.assign(new Error(`server said ${code}`), { code, severity: 'FATAL' });
}

t.test('refusals and lost connections are the database being away, wrapped or not', async (t) => {
  for (const code of ['53300', '57P01', '57P02', '57P03', '57014', 'ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'CONNECTION_CLOSED']) {
    t.ok(isDatabaseUnavailable(serverError(code)), code);
    t.ok(isDatabaseUnavailable(new Error('query failed', { cause: serverError(code) })), `${code}, as Drizzle wraps it`);
  }
});

t.test('errors of the query itself are not', async (t) => {
  for (const code of ['42P01', '23505', '22P02', '42883', undefined]) {
    t.notOk(isDatabaseUnavailable(serverError(String(code))), String(code));
  }
  t.notOk(isDatabaseUnavailable(new TypeError('a bug')), 'a TypeError');
  t.notOk(isDatabaseUnavailable(undefined), 'nothing');
});

t.test('a real refusal for too many connections is one', async (t) => {
  // A role allowed no connection at all: the server answers 53300 at once, as it does when max_connections is reached.
  const admin = scratchSession(t, serverUrl());
  const role = `t_${process.pid}_limited`;
  await admin.unsafe(`drop role if exists ${role}`);
  // With the server's password, where it asks for one (the embedded PostgreSQL): the limit is checked once
  // the role has logged in.
  const password = new URL(serverUrl()).password;
  await admin.unsafe(
    `create role ${role} login connection limit 0${password ? ` password '${decodeURIComponent(password).replaceAll("'", "''")}'` : ''}`,
  );
  t.teardown(() => admin.unsafe(`drop role if exists ${role}`));
  const url = new URL(serverUrl());
  url.username = role;
  const error = await withSession(
    url.href,
    (client) =>
      client`select 1`.then(
        () => undefined,
        (error: unknown) => error,
      ),
    { connect_timeout: 5 },
  );
  t.equal((error as { code?: string }).code, '53300', 'the server refused the connection with too_many_connections');
  t.ok(isDatabaseUnavailable(error), 'which is the database being away');
});
