/**
 * A real Redis Cluster for tests: 3 masters + 3 replicas, each its own redis-server (cluster mode, AOF with
 * `appendfsync always`) in a temp dir on a free port, joined with `redis-cli --cluster create`. Never the
 * shared Redis on 6379; every process is stopped by its PID. A missing binary is a hard error, never a skip.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, tempDir, waitExit } from './redis.js';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MISSING = (bin: string) => `${bin} not found on PATH: install it (apt-get install redis-server redis-tools); Redis Cluster tests are never skipped`;

export interface ClusterNode {
  port: number;
  address: string;
  proc: ChildProcess;
}

export interface RedisCluster {
  nodes: ClusterNode[];
  /** REDIS_CLUSTER_NODES for the service: every node as a seed */
  seeds: string;
  /** runs redis-cli against one node, answers its output */
  cli(port: number, ...args: string[]): Promise<string>;
  /** the node that is master of the slot holding `key`, and its replicas */
  owners(key: string): Promise<{ master: ClusterNode; replicas: ClusterNode[] }>;
  /** waits until every live node reports cluster_state:ok and `ok()` holds */
  settle(ms: number, ok?: () => Promise<boolean>): Promise<void>;
  /** every slot range has a replica, and every replica's link to its master is up */
  replicasInSync(): Promise<boolean>;
  stop(): Promise<void>;
}

interface StartOptions {
  /** cluster-node-timeout: how long a silent master is waited for before its replica takes over */
  nodeTimeoutMs?: number;
}

async function cliOn(port: number, args: string[]): Promise<string> {
  try {
    const { stdout } = await run('redis-cli', ['-p', String(port), ...args], { timeout: 30_000 });
    return stdout;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(MISSING('redis-cli'));
    throw e;
  }
}

async function startNode(dir: string, nodeTimeoutMs: number): Promise<ClusterNode> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    if (port === 6379 || port > 55_535) continue; // the cluster bus listens on port + 10000
    const proc = spawn(
      'redis-server',
      [
        '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
        '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout', String(nodeTimeoutMs), '--appendonly', 'yes', '--appendfsync', 'always',
        '--appendfilename', `aof-${port}.aof`, '--appenddirname', `aof-${port}`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    proc.stdout!.on('data', (d) => (out += d));
    proc.stderr!.on('data', (d) => (out += d));
    const spawned = await new Promise<Error | undefined>((resolve) => {
      proc.once('error', resolve);
      proc.once('spawn', () => resolve(undefined));
    });
    if (spawned) throw (spawned as NodeJS.ErrnoException).code === 'ENOENT' ? new Error(MISSING('redis-server')) : spawned;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && proc.exitCode === null) {
      if ((await cliOn(port, ['PING']).catch(() => '')).trim() === 'PONG') return { port, address: `127.0.0.1:${port}`, proc };
      await sleep(50);
    }
    proc.kill('SIGKILL');
    await waitExit(proc, 2000);
    if (attempt >= 4 || !/address already in use/i.test(out)) throw new Error(`redis-server (cluster node) did not start on ${port}:\n${out}`);
  }
}

export async function startRedisCluster(o: StartOptions = {}): Promise<RedisCluster> {
  const dir = await tempDir('redis-cluster-');
  const nodes: ClusterNode[] = [];
  const stop = async () => {
    await Promise.all(
      nodes.map(async (n) => {
        if (n.proc.exitCode !== null || n.proc.signalCode !== null) return;
        n.proc.kill('SIGTERM');
        if (!(await waitExit(n.proc, 5000))) {
          n.proc.kill('SIGKILL');
          await waitExit(n.proc, 2000);
        }
      }),
    );
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 6; i++) nodes.push(await startNode(dir, o.nodeTimeoutMs ?? 1000));
    await cliOn(nodes[0].port, ['--cluster', 'create', ...nodes.map((n) => n.address), '--cluster-replicas', '1', '--cluster-yes']);
    const byPort = (p: number) => nodes.find((n) => n.port === p)!;
    const live = () => nodes.filter((n) => n.proc.exitCode === null && n.proc.signalCode === null);
    const cluster: RedisCluster = {
      nodes,
      seeds: nodes.map((n) => n.address).join(','),
      cli: (port, ...args) => cliOn(port, args),
      async owners(key) {
        const slot = Number((await cliOn(live()[0].port, ['CLUSTER', 'KEYSLOT', key])).trim());
        // CLUSTER SLOTS from a live node: [from, to, [host, port, id], replicas...]
        const lines = (await cliOn(live()[0].port, ['--json', 'CLUSTER', 'SLOTS'])).trim();
        const ranges = JSON.parse(lines) as [number, number, ...[string, number, string][]][];
        const r = ranges.find(([from, to]) => slot >= from && slot <= to);
        if (!r) throw new Error(`no node serves slot ${slot}`);
        const [, , master, ...replicas] = r;
        return { master: byPort(Number(master[1])), replicas: replicas.map((x) => byPort(Number(x[1]))) };
      },
      async settle(ms, ok = async () => true) {
        const deadline = Date.now() + ms;
        for (;;) {
          const states = await Promise.all(live().map((n) => cliOn(n.port, ['CLUSTER', 'INFO']).catch(() => '')));
          if (states.every((s) => s.includes('cluster_state:ok')) && (await ok())) return;
          if (Date.now() > deadline) throw new Error(`cluster did not settle within ${ms} ms:\n${states.join('\n')}`);
          await sleep(100);
        }
      },
      async replicasInSync() {
        const ranges = JSON.parse(await cliOn(live()[0].port, ['--json', 'CLUSTER', 'SLOTS'])) as unknown[][];
        if (ranges.some((r) => r.length < 4)) return false;
        const infos = await Promise.all(live().map((n) => cliOn(n.port, ['INFO', 'replication'])));
        return infos.every((i) => i.includes('role:master') || i.includes('master_link_status:up'));
      },
      stop,
    };
    // every node must know every slot's owner before a client's discovery can trust any of them
    await cluster.settle(30_000, async () => {
      const known = await Promise.all(live().map((n) => cliOn(n.port, ['CLUSTER', 'INFO'])));
      if (!known.every((s) => /cluster_known_nodes:6\b/.test(s) && /cluster_slots_ok:16384\b/.test(s))) return false;
      return cluster.replicasInSync();
    });
    return cluster;
  } catch (e) {
    await stop();
    throw e;
  }
}
