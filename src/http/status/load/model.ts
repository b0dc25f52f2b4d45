/**
 * What the status page shows, as loaded by load/ and drawn by draw/ (cards.ts, layout.ts and the
 * rest): the one file of load/ that draw/ imports. What draw/ shows as it is read elsewhere (a
 * stored row's shape, the period explanation, the graph, the bounds of what was read) is named
 * here too, so draw/ needs nothing from store/ or the loaders.
 */
import type { FreshnessJson } from '../../../core/intervals/freshness.js';
import type { PeriodState } from '../../../core/periods/policy.js';
import type { RunState } from '../../../core/runs/runs.js';
import type { Domain, Interval } from '../../../core/types.js';
import type { AssetRow } from '../../../store/assets/assets.js';
import type { OpenRepairsOfAsset } from '../../../store/repairs/listings.js';
import type { DrawItem } from '../draw/pixels.js';
import type { WhyWaiting } from '../draw/why-waiting.js';
import type { PresetName } from '../draw/window.js';

export { HISTORY_MAX_SEGMENTS } from '../../../store/assets/asset-history.js';
export type { RunReportView, RunView } from '../../../store/runs/history.js';
export type { GraphJson } from '../../graph/load.js';
export { MAX_RUNS, type PeriodExplanation, type UpstreamExplanation } from '../../period-explain.js';

/**
 * Drawing states of a coverage timeline, least severe first: the coverage states, plus gaps
 * outside the extent, told apart as before the first completion (`outside`) and between the last
 * one and now (`behind`: the lag).
 */
export const COVERAGE_STATES = ['complete', 'outside', 'behind', 'replay_required', 'gap'] as const;
export type CoverageDrawState = (typeof COVERAGE_STATES)[number];

/** Period states, least severe first: a pixel holding several periods shows the most severe. */
export { PERIOD_STATES, type PeriodState } from '../../../core/periods/policy.js';

export interface PieceDetail {
  readonly version: string | null;
  readonly requiredVersion: string | null;
}

/** A gap inside the covered extent, or a replay_required range, for the list under a timeline. */
export interface Problem extends Interval {
  readonly state: 'gap' | 'replay_required';
  readonly version: string | null;
  readonly requiredVersion: string | null;
}

export interface AssetView {
  readonly name: string;
  readonly domain: Domain;
  readonly eventCount: number;
  readonly segmentCount: number;
  readonly extent: Interval | null;
  readonly window: Interval;
  readonly ratio: number;
  readonly covered: boolean;
  readonly items: readonly DrawItem<PieceDetail>[];
  /** Newest first, at most the page's cap. */
  readonly problems: readonly Problem[];
  readonly problemCount: number;
  /** Of problemCount: gaps inside the covered extent, and replay_required ranges. */
  readonly gapCount: number;
  readonly replayCount: number;
  /** Measure of the window no completion covers (gaps inside and outside the extent). */
  readonly missing: number;
  /** Window-independent facts for the headline. */
  readonly freshness: FreshnessJson;
  /** Holes and replay_required ranges since the asset's first event; null when not counted. */
  readonly history: { readonly gaps: number | null; readonly replayRequired: number | null };
}

export interface PeriodDetail {
  readonly key: string;
  /** Link to the period page. */
  readonly href: string;
  readonly generation: number;
  readonly reason: string | null;
  readonly ratio: number;
  readonly triggeredAt: Date | null;
  /** The period's current run, if it was triggered. */
  readonly run: { readonly state: RunState; readonly attempt: number } | null;
}

export interface LastTrigger {
  readonly key: string;
  readonly generation: number;
  readonly reason: string;
  readonly decidedAt: Date;
  readonly deliveredAt: Date | null;
  readonly failedAt: Date | null;
  readonly attempts: number;
  readonly lastError: string | null;
}

/** Where a rollup is defined: the config file, or the API (PUT /v1/rollups/{id}). */
export type RollupSource = 'file' | 'api';

export interface RollupView {
  readonly id: string;
  readonly source: RollupSource;
  readonly upstream: readonly string[];
  readonly domain: Domain;
  readonly every: string;
  readonly timezone: string;
  readonly policy: string;
  readonly rerun: string;
  readonly target: string;
  readonly window: Interval;
  readonly items: readonly DrawItem<PeriodDetail>[];
  /** Periods overlapping the window, by state. */
  readonly counts: Readonly<Record<PeriodState, number>>;
  /** Every period since begin, by state, whatever the window. */
  readonly totals: Readonly<Record<PeriodState, number>>;
  /** Waiting periods that have ended (time rollups; integer ones: every waiting period but the last). */
  readonly lateWaiting: number;
  /** The newest period (the one containing now, for time rollups), and its state and ratio. */
  readonly current: {
    readonly key: string;
    readonly state: PeriodState;
    readonly ratio: number;
    readonly href: string;
  } | null;
  /** The newest periods of the window that need attention (missed, rerun pending, late), newest first. */
  readonly attention: readonly AttentionPeriod[];
  /** How many periods of the window need attention. */
  readonly attentionCount: number;
  readonly lastTrigger: LastTrigger | null;
  /** Periods whose current run failed, timed out or was lost (every period since begin). */
  readonly failedRuns: number;
  /** A point in the rollup's zone, for tooltips (ISO with offset, or the integer). */
  readonly formatPoint: (point: number) => string | number;
}

export interface AttentionPeriod {
  readonly key: string;
  readonly state: PeriodState;
  readonly ratio: number;
  readonly href: string;
}

export interface PageView {
  readonly generatedAt: Date;
  readonly now: number;
  /** The preset in force, or null when the query gave both start and end. */
  readonly preset: PresetName | null;
  /** Whether time windows end at now (no start or end given), so zooming and presets keep following it. */
  readonly followsNow: boolean;
  /** The focus of the page, when it shows one asset or one rollup. */
  readonly focus: { readonly asset?: string; readonly rollup?: string };
  readonly assets: readonly AssetView[];
  readonly rollups: readonly RollupView[];
  /** Rows instead of cards, for a large installation's unfocused page. */
  readonly overview?: Overview;
  /** Failed, timed-out and lost runs of the rollups in view, shown before everything else. */
  readonly failedRuns: FailedRunsView;
  /** Open and partial repair requests per asset in view, the oldest first. */
  readonly repairs: OpenRepairsView;
  /** Which page of the (filtered) assets and rollups this is. */
  readonly paging: {
    readonly q: string | undefined;
    readonly page: number;
    readonly pageSize: number;
    readonly assetsTotal: number;
    readonly rollupsTotal: number;
  };
  readonly notes: readonly string[];
  /** Upstreams in focus that no event has named yet, with the rollups that wait for them. */
  readonly unseen: ReadonlyArray<{ readonly name: string; readonly waiting: readonly string[] }>;
}

export interface OverviewRollup {
  readonly id: string;
  readonly source: RollupSource;
  readonly every: string;
  readonly upstreams: number;
  readonly counts: Readonly<Record<PeriodState, number>>;
  /** Periods whose current run failed, timed out or was lost. */
  readonly failedRuns: number;
  readonly domain: Domain;
  readonly why: WhyWaiting;
}

export type OverviewAsset = AssetRow & {
  readonly freshness: FreshnessJson;
  /** End of the newest complete coverage, in points; null when nothing is complete. */
  readonly coveredUntil: number | null;
};

export interface Overview {
  readonly assets: readonly OverviewAsset[];
  readonly rollups: readonly OverviewRollup[];
}

export interface OpenRepairsView {
  readonly rows: readonly OpenRepairsOfAsset[];
  /** Assets (of the page's focus or filter) with an open or partial request, and those requests. */
  readonly assets: number;
  readonly requests: number;
}

/** A period whose current run ended without success, as the overview lists it. */
export interface FailedRunRow {
  readonly rollupId: string;
  readonly key: string;
  readonly href: string;
  readonly generation: number;
  readonly attempt: number;
  readonly state: RunState;
  readonly error: string | null;
  readonly finishedAt: Date | null;
  readonly nextRetryAt: Date | null;
}

export interface FailedRunsView {
  readonly rows: readonly FailedRunRow[];
  /** Periods of the listed rollups whose current run failed, timed out or was lost. */
  readonly total: number;
}
