/**
 * What the daemon asks of a target type. Each type is one module (queue.ts, webhook.ts,
 * airflow/dag-runs.ts, airflow/asset.ts, dagster/dagster.ts) that exports one TargetType, and
 * registry.ts lists them: config validation, delivery, run following, repair delivery, the
 * metrics' `target` label and the API's schemas all read that list, so a new type is a new module
 * and one line there (docs/architecture.md, "Adding a target type").
 */
import type { Queue, QueueEvents } from 'bullmq';
import type { z } from 'zod';
import type { RepairPayload } from '../core/repairs/repair-payload.js';
import type { RunReport } from '../core/runs/runs.js';
import type { RunIdentity, TriggerPayload } from '../core/runs/trigger.js';
import type { EnvRef } from '../support/fields.js';

export type DeliveryResult =
  | { readonly ok: true }
  /** retry: a transient failure (5xx, network, timeout, credentials); otherwise give up and record it. */
  | { readonly ok: false; readonly retry: boolean; readonly error: string };

/** A delivered run the scheduler asks its target about: its payload names its ids (not its coverage). */
export interface ObservedRun {
  readonly runId: string;
  readonly payload: RunIdentity;
}

/**
 * What a target says about runs, by run id: a report (`lost` when it no longer knows the run), or
 * null when it says nothing new (not started yet, or not in this answer).
 */
export type Observation = ReadonlyMap<string, RunReport | null>;

/** What the daemon knows of a run's earlier deliveries as it hands the target one. */
export interface DeliveryContext {
  /**
   * No delivery of this run (this attempt) was begun before: the count is committed before each
   * one goes out, so a target that otherwise looks for an earlier delivery first (one that Airflow
   * or Dagster would not dedupe by itself) has nothing to find and may send at once.
   */
  readonly first: boolean;
}

/** A type's target for one configuration, built once: it delivers decisions and may be asked about runs. */
export interface Target {
  /** Without a context, as for a redelivery: the target looks for an earlier delivery if it must. */
  deliver(payload: TriggerPayload, context?: DeliveryContext): Promise<DeliveryResult>;
  /** Asks about up to 100 runs in a bounded number of requests; present exactly when the type has `follow` rules. */
  observe?(runs: readonly ObservedRun[]): Promise<Observation | { readonly error: string }>;
  close(): Promise<void>;
}

/** A type's target for one configuration as a repair target: it delivers request attempts. */
export interface RepairTarget {
  /** At least once per attempt: a redelivery finds the attempt's earlier delivery and adds nothing. */
  deliver(payload: RepairPayload): Promise<DeliveryResult>;
  close(): Promise<void>;
}

/** How the runs of a type whose target can be asked about them are followed (scheduler/follow-runs.ts). */
export interface FollowRules<Source extends string = string> {
  /** Recorded as the `source` of the reports its answers make (a run's history, `GET .../runs`). */
  readonly source: Source;
  /** How soon after a delivery the target is first asked about the run. */
  readonly firstCheckMs: number;
  /**
   * Its outcomes also arrive through an event stream (the queue's): checks of a run open for long
   * thin out to a tenth of its age (at most a minute), a safety net for what the stream missed.
   */
  readonly thinOut: boolean;
  /** A finished run can be cleared and run again on the target: it is watched for run.timeout after it finished. */
  readonly watchFinished: boolean;
}

/** A BullMQ queue connection, as much of it as a queue target uses (queue/backend.ts has the whole). */
export interface JobQueues {
  readonly backend: 'redis' | 'postgres';
  queue(name: string, prefix: string): Pick<Queue, 'add' | 'getJobState' | 'getJob' | 'close'>;
  queueEvents(
    name: string,
    prefix: string,
    options?: { lastEventId?: string },
  ): Pick<QueueEvents, 'on' | 'close'>;
}

/** What the daemon hands a type's builders; each takes what it needs. */
export interface TargetDeps {
  readonly queues: JobQueues;
  /** The queue prefix of a queue target that names none: the daemon's `queue.prefix`. */
  readonly defaultPrefix: string;
  /** Told the id of a queue job that finished: a wake-up, not the record (queue.ts). */
  readonly onFinished?: ((runId: string) => void) | undefined;
}

/** A config field of a type that holds a credential: its value, an identity (user name) or a map of values (headers). */
export type SecretKind = 'secret' | 'identity' | 'secret map';

/** What a type says is wrong with a configuration in its place (a field under `target`, and why). */
export interface Problem {
  readonly field: string;
  readonly message: string;
}

/** A target's config with every `{env: NAME}` in it replaced by `R` (never: read from the environment). */
export type WithSecrets<T, R> = T extends EnvRef
  ? R
  : T extends readonly unknown[]
    ? T
    : T extends object
      ? { readonly [K in keyof T]: WithSecrets<T[K], R> }
      : T;

/** A type's config schema: a zod object whose `type` is the type's name. */
export type TargetSchema = z.ZodType<{ readonly type: string }> & z.core.$ZodTypeDiscriminable;

/** A type's configuration ready to deliver: every secret a value. Lives in memory only. */
export type ResolvedConfig<S extends TargetSchema> = WithSecrets<z.output<S>, never>;

/** One target type: everything the daemon asks of it. */
export interface TargetType<S extends TargetSchema = TargetSchema, Source extends string = string> {
  /** The config's `type`, the `target` label of every metric, the name in logs and listings. */
  readonly type: z.output<S>['type'];
  /** Its user documentation: the page, and the section where the page has others. */
  readonly docs: string;
  /** Its entry under `target:` (of a rollup, or of its `repair:`): fields, defaults, checks. */
  readonly schema: S;
  /**
   * Its credential fields, in order, and where the stored form puts them: literal secrets are
   * replaced by placeholders before anything is stored, `{env: NAME}` references are kept, and both
   * are resolved at each delivery (secrets.ts). `last`: the stored form lists them after the other
   * fields, in this order; that key order is part of each rollup's stored definition hash, so it
   * stays as it was first written.
   */
  readonly secrets: {
    readonly fields: ReadonlyArray<readonly [field: keyof z.output<S> & string, kind: SecretKind]>;
    readonly last: boolean;
  };
  /**
   * How its runs are followed, or null when the target cannot be asked about a run: then a rollup's
   * `run.outcome` says whether a run succeeds when delivered (the default) or waits for the
   * downstream job's own report (`POST /v1/runs`, open to runs of any type) up to `run.timeout`
   * (core/runs/outcome.ts).
   */
  readonly follow: FollowRules<Source> | null;
  /** Its target for one resolved configuration (secrets filled in), for triggers. */
  trigger(config: ResolvedConfig<S>, deps: TargetDeps): Target;
  /** Its target for one resolved configuration, for repair request attempts. */
  repair(config: ResolvedConfig<S>, deps: TargetDeps): RepairTarget;
  /** Where a delivery goes, as an operator would look for it (the queue, DAG or asset by name). */
  describe(config: z.output<S>): string;
  /** Why this target cannot serve a rollup of this domain, if it cannot. */
  rollupProblem?(config: z.output<S>, domain: 'time' | 'integer'): Problem | undefined;
  /** What a `repair.target` of this type may not set. */
  repairProblems?(config: z.output<S>): Problem[];
  /** Defaults taken from the rollup (its time zone). */
  withRollupDefaults?(config: z.output<S>, rollup: { readonly timezone: string }): z.output<S>;
}

/** Declares a type, keeping its schema's and its report source's exact types for the registry. */
export function defineTarget<S extends TargetSchema, Source extends string = never>(
  type: TargetType<S, Source>,
): TargetType<S, Source> {
  return type;
}
