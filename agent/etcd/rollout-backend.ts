/**
 * The rollout's backend over etcd (agent/rollout/backend.ts), for hosts run
 * by systemd without Kubernetes. Under the prefix (default /spcd/):
 * - `desired`: the desired document (desired.ts), read and then watched;
 * - `rollout/ledger`: the ledger (JSON), written only by a transaction that
 *   compares its mod revision with the one read (create revision 0 when new);
 * - `nodes/<node>`: each node's phase report (JSON), written only by that node;
 * - `queue/<node>/<lease id>`: one key per node waiting for or holding one of the N
 *   slots, bound to the lease the node keeps (session.ts); the N oldest hold
 *   them (slots.ts, queue.ts).
 */
import type { Etcd3, IKeyValue } from 'etcd3';
import { SpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { DesiredDocument, RolloutBackend } from '../rollout/backend.js';
import type { Ledger, PhaseReport } from '../rollout/decide.js';
import { etcdErrorText, unavailable } from './client.js';
import { parseEtcdDesired } from './desired.js';
import { fleetKeys } from './keys.js';
import { EtcdSlots } from './slots.js';
import { ledgerFromJson, phaseFromJson } from '../rollout/records.js';

export interface EtcdRolloutBackendDeps {
  readonly client: Etcd3;
  /** Ends in '/'. */
  readonly prefix: string;
  readonly node: string;
  /** The slot lease's TTL (a dead holder's slot frees after it). */
  readonly slotTtlSeconds: number;
  readonly clock: Clock;
  readonly log: Logger;
  /** Pause before reading the desired key again after a failure. Default 5 s. */
  readonly retryMs?: number;
}

export class EtcdRolloutBackend implements RolloutBackend {
  readonly slots: EtcdSlots;

  constructor(private readonly d: EtcdRolloutBackendDeps) {
    this.slots = new EtcdSlots({
      client: d.client,
      prefix: d.prefix,
      holder: d.node,
      ttlSeconds: d.slotTtlSeconds,
      clock: d.clock,
      log: d.log,
    });
  }

  get desiredKey(): string {
    return fleetKeys(this.d.prefix).desired;
  }
  get ledgerKey(): string {
    return fleetKeys(this.d.prefix).ledger;
  }
  phaseKey(node: string): string {
    return `${fleetKeys(this.d.prefix).nodes}${node}`;
  }

  /**
   * Reads the desired key, then watches it from the revision read: each put
   * is delivered once (by mod revision), a delete delivers undefined. A read
   * that fails is retried; a watch that drops resumes where it was.
   */
  async followDesired(
    onChange: (doc: DesiredDocument | undefined) => void,
    onInvalid: (err: SpcdError) => void,
  ): Promise<{ stop(): void }> {
    const { client, clock, log } = this.d;
    const key = this.desiredKey;
    let stopped = false;
    let last: string | undefined; // the mod revision delivered ('' = absent)
    let watcher: { cancel(): Promise<void> } | undefined;
    let cancelRetry: (() => void) | undefined;
    const deliver = (kv: IKeyValue | undefined): void => {
      const version = kv ? kv.mod_revision : '';
      if (stopped || version === last) return;
      last = version;
      if (!kv) return onChange(undefined);
      try {
        onChange(parseEtcdDesired(kv.value.toString(), key, version));
      } catch (err) {
        onInvalid(unavailable(err, 'parsing the desired document'));
      }
    };
    const start = async (): Promise<void> => {
      if (stopped) return;
      try {
        const res = await client.get(key).exec();
        deliver(res.kvs[0]);
        const w = client
          .watch()
          .key(key)
          .startRevision(String(BigInt(res.header.revision) + 1n))
          .watcher();
        w.on('put', (kv) => deliver(kv));
        w.on('delete', () => deliver(undefined));
        w.on('error', (err) => {
          log.warn({ err: etcdErrorText(err) }, 'desired key watch ended; reading it again');
          watcher = undefined;
          void w.cancel().catch(() => undefined);
          cancelRetry = clock.setTimer(this.d.retryMs ?? 5_000, () => void start());
        });
        watcher = w;
        if (stopped) void w.cancel().catch(() => undefined);
      } catch (err) {
        log.warn({ err: etcdErrorText(err), key }, 'desired key unreadable; retrying');
        cancelRetry = clock.setTimer(this.d.retryMs ?? 5_000, () => void start());
      }
    };
    void start(); // the first read may wait for a member to answer: the caller does not
    this.slots.warm(); // told to upgrade, this node then queues without waiting for a lease grant
    return {
      stop: () => {
        stopped = true;
        cancelRetry?.();
        void watcher?.cancel().catch(() => undefined);
      },
    };
  }

  async readLedger(): Promise<{ ledger: Ledger | undefined; version: string | undefined }> {
    try {
      const res = await this.d.client.get(this.ledgerKey).exec();
      const kv = res.kvs[0];
      const ledger = ledgerFromJson(kv?.value.toString());
      // a ledger that is there but is not one is not "nothing written": a forged or broken
      // ledger must not reset the canaries and the failures it should hold
      if (kv && !ledger)
        throw new SpcdError(
          'FLEET_RECORD_INVALID',
          `etcd key ${this.ledgerKey} is not a rollout ledger spcd wrote; no node goes on until it is fixed or deleted`,
          { key: this.ledgerKey, modRevision: kv.mod_revision },
        );
      return { ledger, version: kv?.mod_revision };
    } catch (err) {
      throw unavailable(err, 'reading the rollout ledger');
    }
  }

  async writeLedger(ledger: Ledger, version: string | undefined): Promise<boolean> {
    const { client } = this.d;
    const key = this.ledgerKey;
    try {
      const res = await (
        version === undefined ? client.if(key, 'Create', '==', 0) : client.if(key, 'Mod', '==', version)
      )
        .then(client.put(key).value(JSON.stringify(ledger)))
        .commit();
      return res.succeeded;
    } catch (err) {
      throw unavailable(err, 'writing the rollout ledger');
    }
  }

  async readPhase(): Promise<PhaseReport | undefined> {
    try {
      return phaseFromJson((await this.d.client.get(this.phaseKey(this.d.node)).string()) ?? undefined);
    } catch (err) {
      throw unavailable(err, 'reading this node phase');
    }
  }

  async writePhase(report: PhaseReport): Promise<void> {
    try {
      await this.d.client.put(this.phaseKey(this.d.node)).value(JSON.stringify(report));
    } catch (err) {
      throw unavailable(err, 'writing this node phase');
    }
  }

  async listPhases(): Promise<PhaseReport[]> {
    try {
      const nodes = fleetKeys(this.d.prefix).nodes;
      const all = await this.d.client.getAll().prefix(nodes).strings();
      // a report counts only under its own node's key (each node's etcd role writes only its own):
      // one node cannot add nodes to the fleet size a failure percentage is taken of
      return Object.entries(all)
        .map(([key, text]) => ({ node: key.slice(nodes.length), report: phaseFromJson(text) }))
        .filter((r) => r.report !== undefined && r.report.node === r.node)
        .map((r) => r.report!);
    } catch (err) {
      throw unavailable(err, 'listing the node phases');
    }
  }

  withSlot<T>(maxConcurrent: number, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    return this.slots.withSlot(maxConcurrent, signal, fn);
  }

  /** Revokes this node's slot lease: after the runner has stopped (no slot is wanted or held). */
  close(): Promise<void> {
    return this.slots.close();
  }
}
