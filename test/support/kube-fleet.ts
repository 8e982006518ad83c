import { afterAll, beforeAll } from 'vitest';
import { KubeClient } from '../../agent/kube/client.js';
import { CONCERNS_PREFIX, FleetSlots } from '../../agent/kube/fleet-slots.js';
import { acquireSlot } from '../../agent/kube/fleet-upgrade.js';
import { silentLogger } from '../../agent/log.js';
import type { FakeClock } from './fake-clock.js';
import { FakeKubeServer } from './kube-server.js';

export const NS = 'spcd-system';
export const log = silentLogger();

type LeaseObj = { spec?: { holderIdentity?: string }; metadata: { labels?: Record<string, string> } };

/**
 * The in-test API server for fleet upgrade slots over Leases (started before
 * the file's tests, stopped after), and what the tests read from it.
 */
export function fleetSlotStand() {
  const server = new FakeKubeServer();
  beforeAll(() => server.start());
  afterAll(() => server.stop());

  // Generous call deadlines: many agents and the server share one process on a loaded machine.
  const api = (): KubeClient => new KubeClient(server.kubeConfig(NS).kc, { callTimeoutMs: 15_000 });
  // A waiter watches, by label selector, the slots that concern it (not one slot by name).
  const watches = (): number => server.openWatches('leases', NS);
  const holderOf = (name: string): string | undefined =>
    (server.get('leases', NS, name)?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
  const lease = (name: string) => server.get('leases', NS, name) as LeaseObj | undefined;
  const lists = (): number => server.calls.filter((c) => c.verb === 'list' && c.resource === 'leases').length;
  /** Successful updates of one slot (takes, renewals, hand-overs, releases). */
  const writes = (name: string): number =>
    server.calls.filter(
      (c) => c.resource === 'leases' && c.name === name && c.verb === 'update' && c.status === 200,
    ).length;
  const conflicts = (name: string): number =>
    server.calls.filter((c) => c.resource === 'leases' && c.name === name && c.status === 409).length;
  /** Writes `node` as the slot's holder (renewed now, its label set), as a holder handing it over would. */
  const handTo = (name: string, node: string, clock: FakeClock): void => {
    const l = server.get('leases', NS, name)!;
    server.put('leases', NS, {
      ...l,
      metadata: {
        ...l.metadata,
        labels: { ...(l.metadata.labels as object), [`${CONCERNS_PREFIX}${node}`]: 'true' },
      },
      spec: { ...(l.spec as object), holderIdentity: node, renewTime: new Date(clock.now()).toISOString() },
    });
  };
  /** The FleetSlots of one node, on slots `<prefix>0..n-1` (lease `leaseSeconds`, default 30 s). */
  const slotsOn =
    (clock: FakeClock, prefix: string, n: number, random?: () => number, leaseSeconds = 30) =>
    (holder: string): FleetSlots =>
      new FleetSlots(
        { api: api(), namespace: NS, holder, clock, log, ...(random ? { random } : {}) },
        { slots: n, leaseDurationSeconds: leaseSeconds, prefix },
      );
  /** A node waiting from a pass that sees every slot busy, queued on slot floor(pick x N). */
  const waiter = (clock: FakeClock, mk: (n: string) => FleetSlots, node: string, pick: number) =>
    acquireSlot(mk(node), { clock, log, random: () => pick, retryMs: 600_000, wakeSpreadMs: 100 });

  return { server, api, watches, holderOf, lease, lists, writes, conflicts, handTo, slotsOn, waiter };
}
