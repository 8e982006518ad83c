/**
 * In-process nodes that run a fleet rollout through a real etcd cluster:
 * each node has its own etcd client, EtcdRolloutBackend and RolloutRunner;
 * the local upgrade is simulated (`apply`), and the fleet records how many
 * ran at once, who applied what, and what each node logged. For
 * etcd-rollout.test.ts and bench/fleet-etcd.ts.
 */
import type { Etcd3 } from 'etcd3';
import { pino } from 'pino';
import { connectEtcd } from '../../agent/etcd/client.js';
import { parseEtcdDesired } from '../../agent/etcd/desired.js';
import { decodeEntry } from '../../agent/etcd/queue.js';
import { EtcdRolloutBackend } from '../../agent/etcd/rollout-backend.js';
import { phaseFromJson } from '../../agent/rollout/records.js';
import type { Logger } from '../../agent/log.js';
import { systemClock } from '../../agent/model/clock.js';
import type { DesiredDocument } from '../../agent/rollout/backend.js';
import type { PhaseReport } from '../../agent/rollout/decide.js';
import { RolloutRunner, targetId } from '../../agent/rollout/runner.js';

export interface FleetNode {
  readonly name: string;
  readonly client: Etcd3;
  readonly backend: EtcdRolloutBackend;
  readonly runner: RolloutRunner;
  /** What this node logged (messages, with the code when there is one). */
  readonly said: string[];
}

export interface EtcdFleetOptions {
  readonly endpoints: readonly string[];
  readonly prefix: string;
  /** The simulated local upgrade of one node. Default: resolves at once. */
  readonly apply?: (node: string, d: DesiredDocument) => Promise<void>;
  readonly slotTtlSeconds?: number;
  readonly callTimeoutMs?: number;
  readonly recheckMs?: number;
  readonly defaultMaxConcurrent?: number;
  /** Clients shared by the nodes (round robin) instead of one each: for a bench of many nodes. Closed by the caller. */
  readonly clientPool?: readonly Etcd3[];
}

export class EtcdFleet {
  readonly nodes: FleetNode[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Node names in the order their upgrades began. */
  readonly started: string[] = [];
  /** Node names whose upgrade completed. */
  readonly applied: string[] = [];
  private readonly upToDate = new Map<string, string>();
  readonly admin: Etcd3;

  constructor(private readonly o: EtcdFleetOptions) {
    this.admin = connectEtcd({ endpoints: o.endpoints, callTimeoutMs: o.callTimeoutMs ?? 2_000 });
  }

  private logger(said: string[]): Logger {
    return pino(
      { level: 'info' },
      {
        write: (line: string) => {
          const r = JSON.parse(line) as { msg?: string; code?: string };
          said.push(r.code ? `${r.msg} (${r.code})` : (r.msg ?? ''));
        },
      },
    );
  }

  /** Starts a node (following the desired key at once). */
  async add(name: string): Promise<FleetNode> {
    const o = this.o;
    const said: string[] = [];
    const log = this.logger(said);
    const pool = o.clientPool;
    const client =
      pool && pool.length > 0
        ? pool[this.nodes.length % pool.length]!
        : connectEtcd({
            endpoints: o.endpoints,
            callTimeoutMs: o.callTimeoutMs ?? 2_000,
            watchBackoffMaxMs: 500,
          });
    const backend = new EtcdRolloutBackend({
      client,
      prefix: o.prefix,
      node: name,
      slotTtlSeconds: o.slotTtlSeconds ?? 2,
      clock: systemClock,
      log,
      retryMs: 300,
    });
    const runner = new RolloutRunner({
      node: name,
      backend,
      clock: systemClock,
      log,
      defaultMaxConcurrent: o.defaultMaxConcurrent ?? 1,
      recheckMs: o.recheckMs ?? 300,
      pullRetryMs: 100,
      soakCheckMs: 50,
      actions: {
        // an absent desired key (no images) changes nothing here, as in the daemon
        pending: (d) => Object.keys(d.images).length > 0 && this.upToDate.get(name) !== targetId(d),
        prePull: async () => undefined,
        apply: async (d) => {
          this.inFlight++;
          this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
          this.started.push(name);
          try {
            await (o.apply?.(name, d) ?? Promise.resolve());
            this.upToDate.set(name, targetId(d));
            this.applied.push(name);
          } finally {
            this.inFlight--;
          }
        },
        health: () => 'healthy',
      },
    });
    const node = { name, client, backend, runner, said };
    this.nodes.push(node);
    await runner.start();
    return node;
  }

  /** The target (runner.ts targetId) of the document last published: reports of an older one are not its. */
  publishedTarget: string | undefined;

  /** Writes the desired document (YAML) to `<prefix>desired`. */
  async publish(doc: string): Promise<void> {
    const key = `${this.o.prefix}desired`;
    this.publishedTarget = targetId(parseEtcdDesired(doc, key, 'published'));
    await this.admin.put(key).value(doc);
  }

  /** Every node's report in etcd, by node. */
  async phases(): Promise<Map<string, PhaseReport>> {
    const all = await this.admin.getAll().prefix(`${this.o.prefix}nodes/`).strings();
    const out = new Map<string, PhaseReport>();
    for (const text of Object.values(all)) {
      const p = phaseFromJson(text);
      if (p) out.set(p.node, p);
    }
    return out;
  }

  /** The slot queue as etcd has it now (queue key -> node, waiting or holding). */
  async slotHolders(): Promise<Record<string, string>> {
    const all = await this.admin.getAll().prefix(`${this.o.prefix}queue/`).strings();
    return Object.fromEntries(Object.entries(all).map(([k, v]) => [k, decodeEntry(v).node]));
  }

  private stopped = false;

  /** Stops every node (revoking its lease) and closes the clients; a second call does nothing. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.nodes.map((n) => n.runner.stop()));
    await Promise.all(this.nodes.map((n) => n.backend.close()));
    if (!this.o.clientPool) for (const n of this.nodes) n.client.close();
    this.admin.close();
  }
}
