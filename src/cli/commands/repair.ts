/**
 * `coverage-rollup repair ASSET --start S --end E [--target T]`: a repair request by hand
 * (no rollup needed) for the not-complete ranges of [S, E) that no open request already asks
 * for. It is stored like the scheduler's requests and delivered, followed, re-sent and abandoned by
 * the lease holder; the target is --target, else the repair target of a rollup reading ASSET.
 */
import { parse as parseYaml } from 'yaml';
import { repairSchema } from '../../config/repair-schema.js';
import { defineRollups } from '../../config/rollups.js';
import { formatPoint, parseBound } from '../../core/intervals/bounds.js';
import { piecesOf } from '../../core/intervals/coverage.js';
import { DEFAULT_REPAIR_POLICY, manualRequest, rangesOfPieces } from '../../core/repairs/repair.js';
import { attemptPayload, repairKey } from '../../core/repairs/repair-payload.js';
import type { Domain } from '../../core/types.js';
import { findAsset } from '../../store/assets/assets.js';
import { wakeScheduler } from '../../store/assets/commit.js';
import { assetSegmentsIn } from '../../store/assets/segments-sql.js';
import { heldRequests, lockRepairAssets, makeRequests } from '../../store/repairs/requests.js';
import { describeTarget } from '../../targets/registry.js';
import { redactTarget } from '../../targets/secrets.js';
import { commandConfig, type GlobalOptions, withSql } from './shared.js';

interface RepairOptions extends GlobalOptions {
  readonly start?: string | undefined;
  readonly end?: string | undefined;
  readonly target?: string | undefined;
  readonly json?: boolean | undefined;
}

/** Segments read for one window at most: a window with more holes is asked for in parts. */
const MAX_SEGMENTS = 100_000;

const usage = (why: string) => {
  process.stderr.write(
    `coverage-rollup repair: ${why}\nusage: coverage-rollup repair ASSET --start S --end E [--target T] [--json]\n`,
  );
  return 2;
};

export async function runRepair(args: readonly string[], values: RepairOptions): Promise<number> {
  const [asset, ...extra] = args;
  if (asset === undefined || extra.length > 0) return usage('name one asset');
  if (values.start === undefined || values.end === undefined) return usage('give --start and --end');
  const config = await commandConfig(values);
  const rollups = defineRollups(config);
  // The target: --target (YAML or JSON), else the repair of a rollup reading the asset, else any.
  const fromRollup =
    rollups.find((r) => r.config.repair && r.rollup.upstream.includes(asset)) ??
    rollups.find((r) => r.config.repair);
  let repair = fromRollup?.config.repair;
  if (values.target !== undefined) {
    let raw: unknown;
    try {
      raw = parseYaml(values.target);
    } catch (error) {
      return usage(`--target is not YAML or JSON: ${(error as Error).message}`);
    }
    const parsed = repairSchema.safeParse({ target: raw });
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return usage(
        `--target${issue.path
          .slice(1)
          .map((p) => `.${String(p)}`)
          .join('')}: ${issue.message}`,
      );
    }
    if (JSON.stringify(redactTarget(parsed.data.target)).includes('"redacted":true'))
      return usage(
        '--target: give secrets as {env: NAME}; a literal one is not stored, so it could not be sent',
      );
    repair = {
      ...parsed.data,
      ...(repair ? { attempts: repair.attempts, every: repair.every, limit: repair.limit } : {}),
    };
  }
  if (!repair)
    return usage(
      'no rollup has a repair target: give --target, e.g. --target "{type: queue, queue: backfills}"',
    );
  const policy = {
    attempts: repair.attempts ?? DEFAULT_REPAIR_POLICY.attempts,
    every: repair.every,
    limit: repair.limit,
  };

  return withSql(config, async (sql) => {
    const known = await findAsset(sql, asset);
    const declared = config.assets.find((a) => a.name === asset);
    // An asset the index never saw, the config does not declare and no rollup reads or writes is
    // most likely a typo: a request for it would wait out its attempts and be abandoned.
    const read = rollups.some((r) => r.rollup.upstream.includes(asset) || r.rollup.output === asset);
    if (!known && !declared && !read)
      return usage(
        `asset ${asset} is unknown: no event of it was seen, it is not under assets: in the config and no rollup reads or writes it (declare it to ask for it before its first event)`,
      );
    const domain: Domain = known?.domain ?? declared?.domain ?? 'time';
    const zone = known?.zone ?? declared?.zone ?? 'UTC';
    let window: { start: number; end: number };
    try {
      window = {
        start: parseBound(values.start, domain, 'start', zone).value,
        end: parseBound(values.end, domain, 'end', zone).value,
      };
    } catch (error) {
      return usage((error as Error).message);
    }
    if (window.end <= window.start) return usage('--end must be after --start');
    // Nothing after now can be produced yet: a request for it would be re-sent until abandoned.
    const nowMicros = Date.now() * 1000;
    if (domain === 'time' && window.start >= nowMicros)
      return usage('--start is in the future: no producer can send data that does not exist yet');
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
      const now = new Date();
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
      // The lease holder delivers it at once.
      await wakeScheduler(tx);
      return { kind: 'made' as const, id: id!, ...made };
    });
    const point = (p: number) => formatPoint(domain, p);
    const cut = cutAt === undefined ? {} : { cut_at: point(cutAt) };
    if (values.json) {
      const body =
        result.kind === 'made'
          ? {
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
              },
            }
          : result.kind === 'held'
            ? { asset, requested: null, open: result.ids }
            : { asset, requested: null, covered: true };
      process.stdout.write(`${JSON.stringify({ ...body, ...cut })}\n`);
      return 0;
    }
    if (cut.cut_at !== undefined)
      process.stdout.write(`${asset}: the window ends in the future; asking up to now, ${cut.cut_at}\n`);
    if (result.kind === 'covered')
      process.stdout.write(
        `${asset}: [${values.start}, ${cut.cut_at ?? values.end}) is covered; nothing to request\n`,
      );
    else if (result.kind === 'held')
      process.stdout.write(
        `${asset}: every range is already requested by open repair ${result.ids.join(', ')}\n`,
      );
    else {
      process.stdout.write(
        `${asset}: repair ${result.id} requested (${repairKey(result.id, 1)}), ${result.ranges.length} of ${result.rangesTotal} range${result.rangesTotal === 1 ? '' : 's'}, sent to ${describeTarget(repair.target)}:\n`,
      );
      for (const r of result.ranges)
        process.stdout.write(
          `  ${point(r.start)} .. ${point(r.end)}  ${r.kind}${r.requiredVersion ? ` (rebuild at ${r.requiredVersion})` : ''}\n`,
        );
    }
    return 0;
  });
}
