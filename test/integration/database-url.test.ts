import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { connect, connectOnce, ensureDatabase } from '../../src/store/pg/db.js';
import { createLogger } from '../../src/support/log.js';
import { ADMIN_URL, uniqueName } from '../helpers/env.js';

// Debian's and the official images' socket directory; PGSOCKET_DIR points elsewhere.
const SOCKET_DIR = process.env.PGSOCKET_DIR ?? '/var/run/postgresql';
const port = new URL(ADMIN_URL).port || '5432';
const hasSocket = existsSync(`${SOCKET_DIR}/.s.PGSQL.${port}`);

describe.skipIf(!hasSocket)('DATABASE_URL with a Unix socket directory (libpq ?host=)', () => {
  it('creates the database and connects through the socket, not TCP', async () => {
    const name = uniqueName('cr_socket');
    const user = new URL(ADMIN_URL).username || 'root';
    const url = `postgres://${user}@localhost:${port}/${name}?host=${encodeURIComponent(SOCKET_DIR)}`;
    await ensureDatabase(url, createLogger('silent'));
    const sql = connect(url, { max: 1 });
    try {
      const [row] = await sql<{ addr: string | null; db: string }[]>`
        select inet_server_addr() as addr, current_database() as db`;
      // inet_server_addr() is null exactly when the session came in over a Unix socket.
      expect(row).toEqual({ addr: null, db: name });
    } finally {
      await sql.end();
      const admin = connectOnce(ADMIN_URL);
      await admin`drop database if exists ${admin(name)} with (force)`;
      await admin.end();
    }
  });
});

describe('a missing database the role may not create', () => {
  it('says what to run, with the role as owner (PostgreSQL 15 lets only the owner create in public)', async () => {
    const role = uniqueName('cr_nocreate');
    const admin = connectOnce(ADMIN_URL);
    await admin`create role ${admin(role)} login nocreatedb`;
    try {
      const url = new URL(ADMIN_URL);
      url.username = role;
      url.password = '';
      url.pathname = `/${uniqueName('cr_missing')}`;
      const name = url.pathname.slice(1);
      await expect(ensureDatabase(url.toString(), createLogger('silent'))).rejects.toThrow(
        `database "${name}" does not exist and role ${role} may not create it; run: createdb -O ${role} ${name}`,
      );
    } finally {
      await admin`drop role if exists ${admin(role)}`;
      await admin.end();
    }
  });
});

describe('a role that does not exist', () => {
  it('says the server refused the login, not that it cannot be reached', async () => {
    const url = new URL(ADMIN_URL);
    url.username = uniqueName('cr_norole');
    url.password = '';
    // The server's own words follow: 'role … does not exist' under trust, 'password
    // authentication failed' under scram or md5 (a TEST_ADMIN_URL with a password).
    await expect(ensureDatabase(url.toString(), createLogger('silent'))).rejects.toThrow(
      /^PostgreSQL at .* refused the login: .+/,
    );
  });
});

describe('nothing listening', () => {
  it('says PostgreSQL cannot be reached', async () => {
    const url = new URL(ADMIN_URL);
    url.port = '1'; // privileged and unused: the connection is refused at once
    await expect(ensureDatabase(url.toString(), createLogger('silent'))).rejects.toThrow(
      /^cannot reach PostgreSQL at /,
    );
  });
});
