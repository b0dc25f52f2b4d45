/**
 * The top of V8 profiles, as text: allocation profiles (.heapprofile, from alloc-sampling.mjs:
 * bytes allocated, garbage included) and CPU profiles (.cpuprofile, from node --cpu-prof: self
 * time). Sums every file given, by function (name, file:line) and by where the code lives
 * (our src/ per folder, or the npm package, or node itself).
 *
 * A CPU profile can be cut to a window of the monotonic clock its timestamps use (microseconds, as
 * `process.hrtime.bigint() / 1000n` in any process on the machine: bench/repairs.ts prints its
 * phases so), to see one phase of a benchmark alone.
 *
 *   npx tsx bench/profile/top.ts [--top 25] [--from US] [--to US] FILE...
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface HeapNode {
  readonly callFrame: CallFrame;
  readonly selfSize: number;
  readonly children: HeapNode[];
}
interface CpuNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: number[];
}

const args = process.argv.slice(2);
const option = (name: string): number | undefined => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : undefined;
};
const TOP = option('--top') ?? 25;
/** Only the CPU samples taken in [FROM, TO) (monotonic microseconds). */
const FROM = option('--from') ?? Number.NEGATIVE_INFINITY;
const TO = option('--to') ?? Number.POSITIVE_INFINITY;
const optionAt = new Set(
  ['--top', '--from', '--to'].flatMap((o) =>
    args.includes(o) ? [args.indexOf(o), args.indexOf(o) + 1] : [],
  ),
);
const files = args.filter((_, i) => !optionAt.has(i));

/** Where a frame's code lives: src/<folder>, node_modules/<package>, node:<module>, or (v8). */
function placeOf(url: string): string {
  if (url === '') return '(v8/native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  const ours = /\/(?:dist\/)?src\/([^/]+)/.exec(url);
  if (ours) return `src/${ours[1]!.replace(/\.[jt]s$/, '')}`;
  if (url.startsWith('node:')) return url.split('/')[0]!;
  return url.replace(/^file:\/\//, '');
}

const frameKey = (f: CallFrame) =>
  `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(node_modules|src)\//, '$1/')}:${f.lineNumber + 1}`;

const byFunction = new Map<string, number>();
const byPlace = new Map<string, number>();
let total = 0;
let kind: 'bytes' | 'ms' = 'bytes';
let span = 0;

const add = (frame: CallFrame, value: number) => {
  byFunction.set(frameKey(frame), (byFunction.get(frameKey(frame)) ?? 0) + value);
  byPlace.set(placeOf(frame.url), (byPlace.get(placeOf(frame.url)) ?? 0) + value);
  total += value;
};

for (const file of files) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  if (profile.head) {
    kind = 'bytes';
    if (profile.window) span += (profile.window.to - profile.window.from) / 1000;
    const walk = (node: HeapNode) => {
      if (node.selfSize > 0) add(node.callFrame, node.selfSize);
      for (const child of node.children) walk(child);
    };
    walk(profile.head);
  } else {
    kind = 'ms';
    const from = Math.max(FROM, profile.startTime);
    const to = Math.min(TO, profile.endTime);
    span += Math.max(0, to - from) / 1e6;
    const nodes = new Map<number, CpuNode>(profile.nodes.map((n: CpuNode) => [n.id, n]));
    let at = profile.startTime;
    profile.samples.forEach((id: number, i: number) => {
      const delta = profile.timeDeltas[i] ?? 0;
      at += delta;
      if (at < from || at >= to) return;
      const node = nodes.get(id)!;
      if (node.callFrame.functionName === '(idle)') return;
      add(node.callFrame, delta / 1000);
    });
  }
}

const fmt = (v: number) => (kind === 'bytes' ? `${(v / 1e6).toFixed(1)} MB` : `${v.toFixed(0)} ms`);
const pct = (v: number) => `${((100 * v) / total).toFixed(1)}%`;
const print = (title: string, map: Map<string, number>) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, v] of [...map].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
    process.stdout.write(`${fmt(v).padStart(10)} ${pct(v).padStart(6)}  ${k}\n`);
  }
};
process.stdout.write(
  `${files.length} profile(s), ${span.toFixed(0)} s, total ${fmt(total)}${
    kind === 'bytes' && span > 0 ? ` (${(total / 1e6 / span).toFixed(2)} MB/s)` : ''
  }${kind === 'ms' && span > 0 ? ` of CPU (${((100 * total) / 1000 / span).toFixed(1)}% of one core)` : ''}\n`,
);
print('by place', byPlace);
print('by function', byFunction);
