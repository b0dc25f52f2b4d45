import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Queue } from 'bullmq';
import { parseConfig } from '../../../src/config/index.js';
import { TEST_TOKEN, testProducer } from '../../helpers/daemon.js';
import { withTestBackend } from '../../helpers/env.js';
import { DaemonProcess } from '../../helpers/process.js';
import type { Json } from './airflow.js';

/**
 * The built daemon of a real-system suite, for the whole file: `raw` on the test queue backend,
 * written to DIR/daemon.json, started and listening, and a producer on its events queue. Not in
 * processHarness (it ends processes after every test): killed should the worker exit first.
 */
export async function startSuiteDaemon(
  name: string,
  dir: string,
  raw: Record<string, unknown>,
): Promise<{ daemon: DaemonProcess; producer: Queue }> {
  const configPath = join(dir, 'daemon.json');
  writeFileSync(configPath, JSON.stringify(withTestBackend(raw)));
  const daemon = new DaemonProcess(name, configPath);
  process.once('exit', () => daemon.running && daemon.signal('SIGKILL'));
  await daemon.waitForLog('listening', { timeout: 60_000, what: 'the daemon to listen' });
  return { daemon, producer: testProducer(parseConfig(withTestBackend(raw))) };
}

/** A GET of the daemon's API with the test token, parsed. */
export async function daemonApi(daemon: DaemonProcess, path: string): Promise<Json> {
  const response = await fetch(`${daemon.url}${path}`, {
    headers: { authorization: `Bearer ${TEST_TOKEN}` },
  });
  return (await response.json()) as Json;
}
