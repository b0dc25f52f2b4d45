import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';
import { waitFor } from './wait.js';

/** Whether `redis-server` is on PATH: the Cluster tests skip, saying so, only when it is not. */
export const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;

export interface ClusterNode {
  readonly port: number;
  readonly address: string;
  readonly pid: number | undefined;
  /** SIGKILL, and wait until the process is gone. */
  kill(): Promise<void>;
  /**
   * Starts a killed node again on its port and directory: its nodes.conf (kept, unlike the data,
   * which is not persisted) makes it rejoin the Cluster, as a replica once it was failed over.
   */
  restart(): Promise<void>;
}

export interface LocalRedisCluster {
  /** The comma-separated seed URLs, as REDIS_URL takes them. */
  readonly url: string;
  readonly nodes: readonly ClusterNode[];
  /** The node serving `slot` as master right now. */
  masterOf(slot: number): Promise<ClusterNode>;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * A real Redis Cluster of `redis-server` children on free local ports, each node in its own temp
 * directory without persistence, formed with `redis-cli --cluster create`; resolves once every
 * node reports cluster_state:ok. The bus port is chosen free too (an ephemeral port + 10000, the
 * default, may not exist). A short node timeout makes fail-over take seconds, not the default 15.
 */
export async function startRedisCluster({
  masters = 3,
  replicas = 0,
  nodeTimeoutMs = 1000,
}: {
  masters?: number;
  replicas?: number;
  nodeTimeoutMs?: number;
} = {}): Promise<LocalRedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-cluster-'));
  const count = masters * (1 + replicas);
  const nodes: Array<ClusterNode & { child: ChildProcess }> = [];
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < count; i++) nodes.push(await launchNode(join(dir, String(i)), nodeTimeoutMs));
    await Promise.all(nodes.map((n) => answersPing(n)));
    await promisify(execFile)('redis-cli', [
      '--cluster',
      'create',
      ...nodes.map((n) => n.address),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
    await Promise.all(nodes.map((n) => clusterOk(n)));
  } catch (error) {
    await stop();
    throw error;
  }
  const byPort = new Map(nodes.map((n) => [n.port, n]));
  return {
    url: nodes.map((n) => `redis://${n.address}`).join(','),
    nodes,
    async masterOf(slot) {
      for (const node of nodes) {
        if (node.child.exitCode !== null || node.child.signalCode !== null) continue;
        const owner = await ask(node, async (r) => {
          const ranges = (await r.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
          return ranges.find(([lo, hi]) => lo <= slot && slot <= hi)?.[2][1];
        }).catch(() => undefined);
        const master = owner === undefined ? undefined : byPort.get(owner);
        if (master) return master;
      }
      throw new Error(`no live node knows the master of slot ${slot}`);
    },
    stop,
  };
}

async function launchNode(dir: string, nodeTimeoutMs: number) {
  const [port, busPort] = [await freePort(), await freePort()];
  mkdirSync(dir, { recursive: true });
  // biome-ignore format: flag/value pairs read best one pair per line
  const args = [
    '--port', String(port), '--cluster-port', String(busPort), '--bind', '127.0.0.1',
    '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
    '--cluster-node-timeout', String(nodeTimeoutMs), '--dir', dir,
    '--save', '', '--appendonly', 'no', '--daemonize', 'no',
  ];
  let child: ChildProcess;
  let exited: Promise<void>;
  const spawnChild = () => {
    child = spawn('redis-server', args, { stdio: 'ignore' });
    live.add(child);
    const self = child;
    exited = new Promise<void>((resolve) =>
      self.once('exit', () => {
        live.delete(self);
        resolve();
      }),
    );
  };
  spawnChild();
  const node = {
    port,
    address: `127.0.0.1:${port}`,
    get pid() {
      return child.pid;
    },
    get child() {
      return child;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async restart() {
      spawnChild();
      await answersPing(node);
    },
  };
  return node;
}

/** One short-lived plain connection to a node (not a Cluster client: it asks that node only). */
async function ask<T>(node: ClusterNode, question: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(node.port, '127.0.0.1', {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await question(redis);
  } finally {
    redis.disconnect();
  }
}

function answersPing(node: ClusterNode): Promise<unknown> {
  return waitFor(() => ask(node, (r) => r.ping()).catch(() => false), {
    timeout: 10_000,
    interval: 50,
    what: `redis-server on ${node.port} to answer PING`,
  });
}

function clusterOk(node: ClusterNode): Promise<unknown> {
  return waitFor(
    () =>
      ask(node, async (r) => String(await r.call('CLUSTER', 'INFO')).includes('cluster_state:ok')).catch(
        () => false,
      ),
    { timeout: 20_000, interval: 100, what: `node ${node.port} to report cluster_state:ok` },
  );
}
