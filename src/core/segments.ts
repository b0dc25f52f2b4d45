/**
 * Folds changes (in ingest order) into the merged index. Instead of replaying the fold piece by
 * piece (quadratic splitting), one sweep over all boundaries finds, for each elementary piece, the
 * newest completion and the newest replay requirement covering it; the coverage-state rule follows from
 * those two alone.
 */
import type { Change, Segment, SegmentState } from './types.js';

export interface SegmentDelta<S extends Segment> {
  /** Stored segments to delete (the very objects passed in). */
  remove: S[];
  /** New segments to store. */
  insert: Segment[];
}

interface MutableSegment {
  start: number;
  end: number;
  version: string | null;
  state: SegmentState;
  requiredVersion: string | null;
}

/** Max-heap of change indices; a higher index is newer in ingest order. */
class NewestFirst {
  private readonly items: number[] = [];

  top(): number | undefined {
    return this.items[0];
  }

  push(value: number): void {
    const a = this.items;
    a.push(value);
    let i = a.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (a[parent]! >= value) break;
      a[i] = a[parent]!;
      i = parent;
    }
    a[i] = value;
  }

  pop(): void {
    const a = this.items;
    const last = a.pop();
    if (last === undefined || a.length === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= a.length) break;
      const r = l + 1;
      const child = r < a.length && a[r]! > a[l]! ? r : l;
      if (a[child]! <= last) break;
      a[i] = a[child]!;
      i = child;
    }
    a[i] = last;
  }
}

function sameAttributes(a: Omit<Segment, 'start' | 'end'>, b: Omit<Segment, 'start' | 'end'>): boolean {
  return a.version === b.version && a.state === b.state && a.requiredVersion === b.requiredVersion;
}

/** Indices of `changes` of one kind, ordered by start. */
function startOrder(changes: readonly Change[], kind: Change['kind']): number[] {
  const out: number[] = [];
  changes.forEach((c, i) => {
    if (c.kind === kind) out.push(i);
  });
  return out.sort((i, j) => changes[i]!.start - changes[j]!.start);
}

/** Advances the heap to the elementary piece starting at x; returns the newest covering change. */
function newestAt(
  x: number,
  changes: readonly Change[],
  order: readonly number[],
  cursor: { next: number },
  heap: NewestFirst,
): number {
  while (cursor.next < order.length && changes[order[cursor.next]!]!.start <= x) {
    heap.push(order[cursor.next]!);
    cursor.next++;
  }
  // Lazy deletion: x only grows, so an expired change never becomes live again.
  for (let top = heap.top(); top !== undefined && changes[top]!.end <= x; top = heap.top()) heap.pop();
  return heap.top() ?? -1;
}

export function applyChanges<S extends Segment>(
  existing: readonly S[],
  changes: readonly Change[],
): SegmentDelta<S> {
  const live = changes.filter((c) => c.end > c.start);
  const base = existing.filter((s) => s.end > s.start).sort((a, b) => a.start - b.start);

  const bounds: number[] = [];
  for (const x of live) bounds.push(x.start, x.end);
  for (const x of base) bounds.push(x.start, x.end);
  bounds.sort((a, b) => a - b);

  const completions = startOrder(live, 'completion');
  const requirements = startOrder(live, 'replay_requirement');
  const completionCursor = { next: 0 };
  const requirementCursor = { next: 0 };
  const completionHeap = new NewestFirst();
  const requirementHeap = new NewestFirst();
  let b = 0;

  const pieces: MutableSegment[] = [];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const x = bounds[i]!;
    const next = bounds[i + 1]!;
    if (next === x) continue;
    const c = newestAt(x, live, completions, completionCursor, completionHeap);
    const r = newestAt(x, live, requirements, requirementCursor, requirementHeap);
    while (b < base.length && base[b]!.end <= x) b++;
    const stored = b < base.length && base[b]!.start <= x ? base[b] : undefined;

    let attrs: Omit<MutableSegment, 'start' | 'end'>;
    if (c >= 0) attrs = { version: live[c]!.version, state: 'complete', requiredVersion: null };
    else if (stored !== undefined)
      attrs = { version: stored.version, state: stored.state, requiredVersion: stored.requiredVersion };
    else continue;
    // A requirement only counts when newer than the completion; stored state predates every change.
    if (r > c) {
      const required = live[r]!.version;
      if (attrs.version !== required)
        attrs = { ...attrs, state: 'replay_required', requiredVersion: required };
      else attrs = { ...attrs, state: 'complete', requiredVersion: null };
    }

    const prev = pieces[pieces.length - 1];
    if (prev !== undefined && prev.end === x && sameAttributes(prev, attrs)) prev.end = next;
    else pieces.push({ start: x, end: next, ...attrs });
  }

  const byStart = new Map<number, S>();
  for (const s of base) byStart.set(s.start, s);
  const kept = new Set<S>();
  const insert: Segment[] = [];
  for (const p of pieces) {
    const same = byStart.get(p.start);
    if (same !== undefined && same.end === p.end && sameAttributes(same, p)) kept.add(same);
    else insert.push(p);
  }
  return { remove: existing.filter((s) => !kept.has(s)), insert };
}
