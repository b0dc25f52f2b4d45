/** Every operation the daemon serves, in the order the description lists them. */
import type { Operation } from './operation.js';
import { assetCoverage, listAssets } from './schemas/assets.js';
import { listAudit } from './schemas/audit.js';
import { postEvents, postReplayRequirement } from './schemas/events.js';
import { getGraph } from './schemas/graph.js';
import { healthz, metrics, openapi, readyz } from './schemas/health.js';
import { listRepairs, postRepair } from './schemas/repairs.js';
import { listPeriods, listRollups, periodDetail, triggerPeriod } from './schemas/rollups.js';
import { postRunReport, retryPeriod } from './schemas/runs.js';

export const OPERATIONS: readonly Operation[] = [
  listAssets,
  assetCoverage,
  postEvents,
  postReplayRequirement,
  listRollups,
  listPeriods,
  periodDetail,
  triggerPeriod,
  retryPeriod,
  postRunReport,
  listRepairs,
  postRepair,
  getGraph,
  listAudit,
  healthz,
  readyz,
  metrics,
  openapi,
];
