import { describe, expect, it } from 'vitest';
import { condemnation, outputCompletion } from '../../../../src/core/rollups/outputs.js';
import { defineRollup } from '../../../../src/core/rollups/rollup.js';

const spec = {
  id: 'hourly',
  upstream: ['raw'],
  timezone: 'UTC',
  policy: { settle: 0, on_deadline: 'trigger' as const },
  rerun: 'on_replay' as const,
  output: 'agg.hourly',
};
const hourly = defineRollup({ ...spec, every: 'hour', begin: '2026-11-02T00:00:00Z' });
const buckets = defineRollup({ ...spec, id: 'buckets', every: 100, begin: 0, output: 'agg.buckets' });
const hour = {
  start: Date.parse('2026-11-02T10:00:00Z') * 1000,
  end: Date.parse('2026-11-02T11:00:00Z') * 1000,
};

describe('output events', () => {
  it('condemns a period at the next generation, with an id that repeats for the same generation', () => {
    const e = condemnation(hourly, hour, 1);
    expect(e).toMatchObject({
      kind: 'replay_requirement',
      asset: 'agg.hourly',
      domain: 'time',
      version: 'hourly#2',
      id: 'condemn~hourly@20261102T100000Z#2',
      key: 'id:condemn~hourly@20261102T100000Z#2',
      start: { value: hour.start, text: '2026-11-02T10:00:00Z' },
      end: { value: hour.end, text: '2026-11-02T11:00:00Z' },
    });
    expect(condemnation(hourly, hour, 1).key).toBe(e.key);
    expect(condemnation(hourly, hour, 2).version).toBe('hourly#3');
  });

  it('completes a period at {rollup}#g, or at the version the run reported, keyed by the run id', () => {
    expect(outputCompletion(hourly, hour, 3, 'run-7')).toMatchObject({
      kind: 'completion',
      version: 'hourly#3',
      id: 'run-7',
      key: 'id:run-7',
    });
    expect(outputCompletion(hourly, hour, 3, 'run-7', 'v9').version).toBe('v9');
  });

  it('writes an integer rollup output in the integer domain', () => {
    expect(outputCompletion(buckets, { start: 200, end: 300 }, 1, 'r')).toMatchObject({
      domain: 'integer',
      start: { domain: 'integer', value: 200, text: '200' },
      end: { value: 300, text: '300' },
    });
  });

  it('refuses a rollup without an output', () => {
    const { output: _, ...bare } = spec;
    expect(() =>
      condemnation(defineRollup({ ...bare, every: 'hour', begin: '2026-11-02' }), hour, 1),
    ).toThrow('rollup hourly has no output asset');
  });
});
