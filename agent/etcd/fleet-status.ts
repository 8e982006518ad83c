/**
 * What `spcctl fleet status --etcd-endpoints …` reads: every key under the
 * fleet's prefix in one range read (so the desired document, the ledger, the
 * phases and the slot holders are of one revision), turned into the same view
 * as over Kubernetes (agent/rollout/fleet-view.ts) with the backend's own
 * parsers and the shared record readers (agent/rollout/records.ts).
 */
import type { Etcd3 } from 'etcd3';
import { SpcdError } from '../errors.js';
import type { PhaseReport } from '../rollout/decide.js';
import { fleetView, type FleetStatus } from '../rollout/fleet-view.js';
import { ledgerFromJson, phaseFromJson } from '../rollout/records.js';
import { connectEtcd, unavailable } from './client.js';
import { parseEtcdDesired } from './desired.js';
import { fleetKeys, isLiveQueueKey } from './keys.js';
import { decodeEntry } from './queue.js';
import type { EtcdSettings } from './settings.js';

/** Every key under a prefix, at one revision: the etcd boundary of the reader (a unit test fakes it). */
export type RangeRead = (prefix: string) => Promise<{
  readonly revision: string;
  /** `lease`: the lease the key is bound to ('0': none); a reader that does not know it leaves it out. */
  readonly kvs: readonly { key: string; value: string; createRevision: string; lease?: string }[];
}>;

/** The range read over a client: one call, with the client's call deadline; failures are ETCD_UNAVAILABLE. */
export function clientRangeRead(client: Etcd3): RangeRead {
  return async (prefix) => {
    try {
      const res = await client.getAll().prefix(prefix).exec();
      return {
        revision: res.header.revision,
        kvs: res.kvs.map((kv) => ({
          key: kv.key.toString(),
          value: kv.value.toString(),
          createRevision: kv.create_revision,
          lease: String(kv.lease),
        })),
      };
    } catch (err) {
      throw unavailable(err, `reading the keys under ${prefix}`);
    }
  };
}

export interface EtcdFleetWhere {
  readonly endpoints: readonly string[];
  /** Ends in '/'. */
  readonly prefix: string;
}

/**
 * The fleet's view from the keys under the prefix. Throws ETCD_UNAVAILABLE
 * when the read fails, SPEC_INVALID / SPEC_YAML naming the desired key (and
 * the part, the field) when the desired document is invalid.
 */
export async function readEtcdFleetStatus(
  read: RangeRead,
  where: EtcdFleetWhere,
  now: number,
): Promise<FleetStatus> {
  const keys = fleetKeys(where.prefix);
  const { revision, kvs } = await read(where.prefix);
  const byKey = new Map(kvs.map((kv) => [kv.key, kv.value]));
  const desiredText = byKey.get(keys.desired);
  const phases: PhaseReport[] = [];
  const queue: { key: string; node: string; rev: bigint }[] = [];
  for (const { key, value, createRevision, lease } of kvs) {
    if (key.startsWith(keys.nodes)) {
      const p = phaseFromJson(value);
      if (p && p.node === key.slice(keys.nodes.length)) phases.push(p); // only under its own node's key
    } else if (key.startsWith(keys.queue) && /^[0-9]+$/.test(createRevision)) {
      const node = decodeEntry(value).node;
      // as the nodes count it (slots.ts): a key no live lease binds, or under another name, holds nothing
      if (lease !== undefined && !isLiveQueueKey(keys.queue, key, lease, node)) continue;
      queue.push({ key, node, rev: BigInt(createRevision) });
    }
  }
  const source = {
    backend: 'etcd' as const,
    endpoints: where.endpoints,
    prefix: where.prefix,
    desiredKey: keys.desired,
    revision,
  };
  // throws SPEC_INVALID / SPEC_YAML naming the key and the part
  const desired =
    desiredText === undefined ? undefined : parseEtcdDesired(desiredText, keys.desired, revision);
  const slots = slotHolders(queue, desired?.rollout, phases);
  // the rollout object's checks name the key (desired.source)
  return {
    ...source,
    ...fleetView({ desired, ledger: ledgerFromJson(byKey.get(keys.ledger)), phases, slots }, now),
  };
}

/**
 * The slot holders from the queue (decision 0029): the N oldest queue keys by
 * create revision, N the rollout's maxConcurrent. A rollout that names no N
 * leaves it to each node's --fleet-slots, which the records do not carry:
 * then the queued nodes whose phase report says `upgrading` are shown.
 */
function slotHolders(
  queue: readonly { key: string; node: string; rev: bigint }[],
  rollout: unknown,
  phases: readonly PhaseReport[],
): { name: string; holder: string; renewedAt: null }[] {
  const ranked = [...queue].sort((a, b) => (a.rev < b.rev ? -1 : a.rev > b.rev ? 1 : 0));
  const n = (rollout as { maxConcurrent?: unknown } | undefined)?.maxConcurrent;
  const upgrading = new Set(phases.filter((p) => p.phase === 'upgrading').map((p) => p.node));
  const held =
    typeof n === 'number' && Number.isInteger(n) && n > 0
      ? ranked.slice(0, n)
      : ranked.filter((e) => upgrading.has(e.node));
  return held.map((e) => ({ name: e.key, holder: e.node, renewedAt: null }));
}

/**
 * Connects with the operator's settings (spcd's own flags and checks), reads,
 * closes. The whole read has `deadlineMs` (each call its own deadline, and
 * the client's retries on other members fit inside it).
 */
export async function etcdFleetStatus(
  s: EtcdFleetWhere &
    Partial<Pick<EtcdSettings, 'caFile' | 'certFile' | 'keyFile' | 'user' | 'passwordFile'>>,
  now: number,
  opts: { readonly callTimeoutMs?: number; readonly deadlineMs?: number } = {},
): Promise<FleetStatus> {
  const callTimeoutMs = opts.callTimeoutMs ?? 5_000;
  const deadlineMs = opts.deadlineMs ?? 2 * callTimeoutMs;
  const client = connectEtcd({
    endpoints: s.endpoints,
    caFile: s.caFile,
    certFile: s.certFile,
    keyFile: s.keyFile,
    user: s.user,
    passwordFile: s.passwordFile,
    callTimeoutMs,
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new SpcdError(
              'ETCD_UNAVAILABLE',
              `etcd: no answer within ${deadlineMs / 1000}s (no member reachable, or no quorum)`,
              { during: 'reading the fleet', deadlineMs },
            ),
          ),
        deadlineMs,
      );
    });
    return await Promise.race([readEtcdFleetStatus(clientRangeRead(client), s, now), late]);
  } finally {
    clearTimeout(timer);
    client.close();
  }
}
