/**
 * A repair request by hand, no rollup needed: the ranges of [start, end) of an asset the index
 * does not hold complete that no open request already asks for. `POST /v1/repairs` and
 * `coverage-rollup repair --config` (which reads the database directly) both make it here, so
 * the two answer alike. Stored like the scheduler's requests; the lease holder delivers, follows,
 * re-sends and abandons it.
 */
import { type RepairConfig, repairSchema } from '../config/repair-schema.js';
import type { RollupRuntime } from '../config/rollups.js';
import { formatPoint, parseBound } from '../core/intervals/bounds.js';
import { piecesOf } from '../core/intervals/coverage.js';
import { DEFAULT_REPAIR_POLICY, manualRequest, rangesOfPieces } from '../core/repairs/repair.js';
import { attemptPayload, repairKey } from '../core/repairs/repair-payload.js';
import type { Domain } from '../core/types.js';
import { findAsset } from '../store/assets/assets.js';
import { wakeScheduler } from '../store/assets/commit.js';
import { assetSegmentsIn } from '../store/assets/segments-sql.js';
import type { Sql, Tx } from '../store/pg/db.js';
import { heldRequests, lockRepairAssets, makeRequests } from '../store/repairs/requests.js';
import { describeTarget } from '../targets/registry.js';
import { redactTarget } from '../targets/secrets.js';

/** Segments read for one window at most: a window with more holes is asked for in parts. */
const MAX_SEGMENTS = 100_000;

export interface RepairAsk {
  readonly asset: string;
  readonly start: string;
  readonly end: string;
  /** Where to send it, as a target is written in the config (already parsed); else a rollup's. */
  readonly target?: unknown;
}

/** The answer, as `POST /v1/repairs` and `repair --json` give it (schemas/repairs.ts, RepairRequested). */
export interface RepairAnswer {
  asset: string;
  /** Null when nothing was requested: the window is covered (`covered`), or already asked for (`open`). */
  requested: {
    id: number;
    idempotency_key: string;
    ranges: Array<{
      start: string | number;
      end: string | number;
      kind: 'missing' | 'replay_required';
      required_version: string | null;
    }>;
    ranges_total: number;
    /** Where it goes, as an operator would look for it: `queue backfills`, `airflow DAG d`. */
    sent_to: string;
  } | null;
  open?: number[];
  covered?: true;
  /** The window's end when it was cut at now (nothing after now can be produced yet). */
  cut_at?: string | number;
}

/** A request this cannot make, with why; `field` names the input at fault as the caller spells it. */
export class RepairRefused extends Error {
  override readonly name = 'RepairRefused';
}

/**
 * Makes the request. `field(name)` spells an input's name in messages (`--start` on the command
 * line, `start` over HTTP).
 */
export async function requestRepair(
  sql: Sql,
  assets: ReadonlyArray<{
    readonly name: string;
    readonly domain?: Domain | undefined;
    readonly zone: string;
  }>,
  rollups: readonly RollupRuntime[],
  ask: RepairAsk,
  field: (name: string) => string,
  nowMs: number,
  /** Runs in the request's transaction once it is made (the audit's entry), with its id. */
  also?: (tx: Tx, id: number) => Promise<void>,
): Promise<RepairAnswer> {
  const { asset } = ask;
  const repair = repairOf(ask, rollups, field);
  const policy = {
    attempts: repair.attempts ?? DEFAULT_REPAIR_POLICY.attempts,
    every: repair.every,
    limit: repair.limit,
  };
  const known = await findAsset(sql, asset);
  const declared = assets.find((a) => a.name === asset);
  // An asset the index never saw, the config does not declare and no rollup reads or writes is
  // most likely a typo: a request for it would wait out its attempts and be abandoned.
  const read = rollups.some((r) => r.rollup.upstream.includes(asset) || r.rollup.output === asset);
  if (!known && !declared && !read)
    throw new RepairRefused(
      `asset ${asset} is unknown: no event of it was seen, it is not under assets: in the config and no rollup reads or writes it (declare it to ask for it before its first event)`,
    );
  const domain: Domain = known?.domain ?? declared?.domain ?? 'time';
  const zone = known?.zone ?? declared?.zone ?? 'UTC';
  let window: { start: number; end: number };
  try {
    window = {
      start: parseBound(ask.start, domain, 'start', zone).value,
      end: parseBound(ask.end, domain, 'end', zone).value,
    };
  } catch (error) {
    throw new RepairRefused((error as Error).message);
  }
  if (window.end <= window.start) throw new RepairRefused(`${field('end')} must be after ${field('start')}`);
  // Nothing after now can be produced yet: a request for it would be re-sent until abandoned.
  const nowMicros = nowMs * 1000;
  if (domain === 'time' && window.start >= nowMicros)
    throw new RepairRefused(
      `${field('start')} is in the future: no producer can send data that does not exist yet`,
    );
  const cutAt = domain === 'time' && window.end > nowMicros ? nowMicros : undefined;
  if (cutAt !== undefined) window = { ...window, end: cutAt };
  const result = await sql.begin(async (tx) => {
    await lockRepairAssets(tx, [asset]);
    const segments = await assetSegmentsIn(tx, asset, window, MAX_SEGMENTS);
    const last = segments.at(-1);
    // Cut where the read stopped: the rest is asked for by running the command again.
    const upTo = segments.length === MAX_SEGMENTS && last ? { ...window, end: last.end } : window;
    const owed = rangesOfPieces(piecesOf(upTo, segments));
    if (owed.length === 0) return { kind: 'covered' as const };
    const open = (await heldRequests(tx, [asset], owed)).filter((h) => h.active);
    const made = manualRequest(
      owed,
      open.flatMap((h) => h.span),
      policy.limit,
    );
    if (made === null) return { kind: 'held' as const, ids: open.map((h) => h.id) };
    const now = new Date(nowMs);
    const request = {
      asset,
      domain,
      rollupId: null,
      periodLo: null,
      period: null,
      ...made,
      attempts: policy.attempts,
      everyMs: policy.every,
      target: redactTarget(repair.target),
      leaseToken: null,
    };
    const [id] = await makeRequests(tx, [request], now, (m, id) => attemptPayload(m, id, 1, m.ranges, now));
    await wakeScheduler(tx);
    await also?.(tx, id!);
    return { kind: 'made' as const, id: id!, ...made };
  });
  const point = (p: number) => formatPoint(domain, p);
  const cut = cutAt === undefined ? {} : { cut_at: point(cutAt) };
  if (result.kind === 'covered') return { asset, requested: null, covered: true, ...cut };
  if (result.kind === 'held') return { asset, requested: null, open: result.ids, ...cut };
  return {
    asset,
    requested: {
      id: result.id,
      idempotency_key: repairKey(result.id, 1),
      ranges: result.ranges.map((r) => ({
        start: point(r.start),
        end: point(r.end),
        kind: r.kind,
        required_version: r.requiredVersion,
      })),
      ranges_total: result.rangesTotal,
      sent_to: describeTarget(repair.target),
    },
    ...cut,
  };
}

/** The target: the one asked for, else the repair of a rollup reading the asset, else of any rollup. */
function repairOf(ask: RepairAsk, rollups: readonly RollupRuntime[], field: (name: string) => string) {
  const fromRollup =
    rollups.find((r) => r.config.repair && r.rollup.upstream.includes(ask.asset)) ??
    rollups.find((r) => r.config.repair);
  const repair: RepairConfig | undefined = fromRollup?.config.repair;
  if (ask.target === undefined) {
    if (!repair)
      throw new RepairRefused(
        `no rollup has a repair target: give ${field('target')}, e.g. {type: queue, queue: backfills}`,
      );
    return repair;
  }
  const parsed = repairSchema.safeParse({ target: ask.target });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = issue.path
      .slice(1)
      .map((p) => `.${String(p)}`)
      .join('');
    throw new RepairRefused(`${field('target')}${path}: ${issue.message}`);
  }
  if (JSON.stringify(redactTarget(parsed.data.target)).includes('"redacted":true'))
    throw new RepairRefused(
      `${field('target')}: give secrets as {env: NAME}; a literal one is not stored, so it could not be sent`,
    );
  return {
    ...parsed.data,
    ...(repair ? { attempts: repair.attempts, every: repair.every, limit: repair.limit } : {}),
  };
}
