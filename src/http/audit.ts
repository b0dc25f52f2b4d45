/**
 * The audit entry of a write through the API: a route records it with `recordAudit(tx,
 * audited(ctx, caller, action, target, detail))` in the transaction of the write it records
 * (src/store/audit.ts), so it commits or rolls back with the write.
 */
import type { AuditRecord } from '../store/audit.js';
import type { Caller } from './auth.js';
import type { HttpContext } from './context.js';

export function audited(
  ctx: Pick<HttpContext, 'now'>,
  caller: Caller,
  action: string,
  target: AuditRecord['target'],
  detail: Record<string, unknown> = {},
): AuditRecord {
  return { token: caller.name, at: new Date(ctx.now()), action, target, detail };
}
