/** The audit of API writes (migrations/0014_audit.sql): recorded, listed, pruned. */
import type { Db, Sql } from './pg/db.js';

export type AuditTargetType = 'rollup' | 'asset' | 'run' | 'config';

/** One write, as a route records it. */
export interface AuditRecord {
  /** The token's name (src/http/auth.ts Caller), never the token. */
  readonly token: string;
  readonly at: Date;
  /** What was done: `trigger`, `retry`, `repair`, `run_report`, ... (docs/http-api.md "Audit"). */
  readonly action: string;
  readonly target: { readonly type: AuditTargetType; readonly id: string };
  /** What changed, as JSON: for a rollup, `before` and `after`. */
  readonly detail: Record<string, unknown>;
}

export interface AuditRow {
  readonly id: number;
  readonly at: Date;
  readonly token: string;
  readonly action: string;
  readonly targetType: AuditTargetType;
  readonly target: string;
  readonly detail: Record<string, unknown>;
}

/** Records `entry`; given the write's transaction, it commits or rolls back with the write. */
export async function recordAudit(db: Db, entry: AuditRecord): Promise<void> {
  await db`
    insert into audit_log (at, token, action, target_type, target, detail)
    values (${entry.at}, ${entry.token}, ${entry.action}, ${entry.target.type}, ${entry.target.id},
      ${db.json(entry.detail as never)})`;
}

/** Newest first, those with an id below `before` (the previous page's last) when given. */
export async function listAudit(
  db: Db,
  { before, limit }: { readonly before: number | null; readonly limit: number },
): Promise<AuditRow[]> {
  return db<AuditRow[]>`
    select id, at, token, action, target_type as "targetType", target, detail
    from audit_log
    where ${before === null ? db`true` : db`id < ${before}`}
    order by id desc
    limit ${limit}`;
}

/** Entries deleted per statement, so no delete holds many row locks for long. */
const PRUNE_BATCH = 1000;

/** History retention of the audit: entries recorded before `before` are deleted. Dry: counted. */
export async function pruneAudit(sql: Sql, before: Date, dryRun: boolean): Promise<number> {
  if (dryRun) {
    const [row] = await sql<[{ n: number }]>`select count(*)::int as n from audit_log where at < ${before}`;
    return row.n;
  }
  let deleted = 0;
  for (;;) {
    const done = await sql`
      delete from audit_log where id in (
        select id from audit_log where at < ${before} order by id limit ${PRUNE_BATCH})`;
    deleted += done.count;
    if (done.count < PRUNE_BATCH) return deleted;
  }
}
