import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Sql } from '../../src/store/pg/db.js';

/**
 * One process's PostgreSQL sessions, told apart from those of other processes of the same
 * application: the local TCP ports of its sockets (Linux /proc) are the `client_port`s the server
 * shows in pg_stat_activity.
 */
export function localPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // closed since the listing
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length > 9 && inodes.has(fields[9]!))
        ports.push(Number.parseInt(fields[1]!.split(':').at(-1)!, 16));
    }
  }
  return ports;
}

/** How many of the process's sessions named `application` (before the `@instance`) are inside a transaction now. */
export async function sessionsInTransaction(sql: Sql, pid: number, application: string): Promise<number> {
  const ports = localPorts(pid);
  if (ports.length === 0) return 0;
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity
    where datname = current_database() and split_part(application_name, '@', 1) = ${application}
      and xact_start is not null and client_port = any(${ports}::int[])`;
  return row?.n ?? 0;
}
