/**
 * Shared vocabulary of the pure core. Every point is a JavaScript safe integer: for the `time`
 * domain, microseconds since the Unix epoch (PostgreSQL's precision); for the `integer` domain,
 * the value itself. One representation lets the algebra ignore the domain.
 */
export type Domain = 'time' | 'integer';

/** Half-open interval [start, end). */
export interface Interval {
  readonly start: number;
  readonly end: number;
}

/** Materialised state of an indexed piece. Gaps are never stored: they are the absence of segments. */
export type SegmentState = 'complete' | 'replay_required';

/**
 * One piece of the merged index: the newest completion covering it decides `version`; the newest
 * replay requirement newer than that completion decides `state` and `requiredVersion`.
 */
export interface Segment extends Interval {
  readonly version: string | null;
  readonly state: SegmentState;
  readonly requiredVersion: string | null;
}

/** One accepted change to an asset, in ingest order. */
export interface Change extends Interval {
  readonly kind: 'completion' | 'replay_requirement';
  readonly version: string | null;
}

export type PieceState = 'complete' | 'gap' | 'replay_required';

/** A projected piece of a window; gaps carry no version. */
export interface Piece extends Interval {
  readonly state: PieceState;
  readonly version: string | null;
  readonly requiredVersion: string | null;
}
