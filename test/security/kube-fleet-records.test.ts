import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../../agent/kube/client.js';
import { FleetSlots, SLOT_LABEL } from '../../agent/kube/fleet-slots.js';
import {
  KubeRolloutBackend,
  LEDGER_ANNOTATION,
  LEDGER_LEASE,
  PHASE_ANNOTATION,
  PHASE_LABEL,
  phaseLeaseName,
} from '../../agent/kube/rollout-backend.js';
import { silentLogger } from '../../agent/log.js';
import { FakeClock } from '../support/fake-clock.js';
import { FakeKubeServer } from '../support/kube-server.js';

/**
 * Attacks on the rollout's shared records in Kubernetes by one node (its
 * service account writes Leases in spcd's namespace): a slot held for ever
 * by a renewTime in the future, a ledger forged so that it reads as empty
 * (the canaries and failures it holds forgotten), and phase Leases that
 * inflate the fleet size a failure percentage is taken of. The in-test API
 * server, spcd's own backend through the real client-node; the Kubernetes
 * counterpart of etcd-fleet-records.test.ts.
 */
const NS = 'spcd-system';
const log = silentLogger();
const server = new FakeKubeServer();
const api = (): KubeClient => new KubeClient(server.kubeConfig(NS).kc, { callTimeoutMs: 15_000 });

beforeAll(() => server.start());
afterAll(() => server.stop());

const backendOf = (node: string, clock: FakeClock): KubeRolloutBackend =>
  new KubeRolloutBackend({
    api: api(),
    namespace: NS,
    node,
    configMap: 'spcd-desired',
    leaseDurationSeconds: 30,
    clock,
    log,
  });

const lease = (name: string, extra: { labels?: object; annotations?: object; spec?: object }) =>
  server.put('leases', NS, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace: NS, labels: extra.labels, annotations: extra.annotations },
    spec: extra.spec ?? {},
  });

describe("a node's forged fleet records over Kubernetes", () => {
  it('a renewTime in the future holds a slot one lease duration after it is seen, not for ever', async () => {
    const clock = new FakeClock();
    const prefix = 'future-slot-';
    // node-b (every node may write every slot Lease) claims the one slot until the year 2099
    lease(`${prefix}0`, {
      labels: { [SLOT_LABEL]: 'true' },
      spec: {
        holderIdentity: 'node-b',
        leaseDurationSeconds: 1_000_000_000,
        acquireTime: '2099-01-01T00:00:00.000000Z',
        renewTime: '2099-01-01T00:00:00.000000Z',
      },
    });
    const slots = new FleetSlots(
      { api: api(), namespace: NS, holder: 'node-a', clock, log },
      { slots: 1, leaseDurationSeconds: 30, prefix },
    );
    expect(await slots.acquire()).toBeUndefined(); // seen now: held, as a live holder's would be
    clock.advance(29_999);
    expect(await slots.acquire()).toBeUndefined();
    clock.advance(2); // the record has not changed for 30 s by node-a's clock
    const h = await slots.acquire();
    expect(h?.name).toBe(`${prefix}0`);
    expect(server.get('leases', NS, `${prefix}0`)?.spec).toMatchObject({ holderIdentity: 'node-a' });
  });

  it('a malformed ledger is an error, not an empty ledger', async () => {
    const backend = backendOf('node-a', new FakeClock());
    const forged = [
      '{"rollout":"r1","canaries":', // not JSON
      JSON.stringify({ rollout: 'r1' }), // not a ledger
      undefined, // the annotation removed: the Lease is there, the ledger is not
    ];
    for (const text of forged) {
      lease(LEDGER_LEASE, { annotations: text === undefined ? undefined : { [LEDGER_ANNOTATION]: text } });
      await expect(backend.readLedger()).rejects.toMatchObject({
        code: 'FLEET_RECORD_INVALID',
        details: { lease: LEDGER_LEASE, namespace: NS },
      });
    }
    // absent is "nothing written yet", as before
    server.remove('leases', NS, LEDGER_LEASE);
    await expect(backend.readLedger()).resolves.toEqual({ ledger: undefined, version: undefined });
  });

  it('a phase Lease counts toward the fleet size only when it is consistent with its own node', async () => {
    const backend = backendOf('node-a', new FakeClock());
    /** A Lease labelled as a phase, named `name`, held by `holder`, reporting for `node`. */
    const phaseAs = (name: string, holder: string, node: string) =>
      lease(name, {
        labels: { [PHASE_LABEL]: 'true' },
        annotations: {
          [PHASE_ANNOTATION]: JSON.stringify({ node, rollout: 'r1', phase: 'done', since: 0 }),
        },
        spec: { holderIdentity: holder },
      });
    await backend.writePhase({ node: 'node-a', rollout: 'r1', phase: 'done', since: 0 });
    phaseAs(phaseLeaseName('node-b'), 'node-b', 'ghost-1'); // node-b's own Lease, speaking for a node that does not exist
    phaseAs(phaseLeaseName('ghost-2'), 'node-b', 'ghost-2'); // a ghost's Lease whose holder is node-b
    phaseAs('spcd-upgrade-slot-0', 'ghost-3', 'ghost-3'); // a slot Lease (every node writes them) made a phase
    phaseAs(phaseLeaseName('node-c'), 'node-c', 'node-c'); // a consistent report of another node counts
    const nodes = (await backend.listPhases()).map((p) => p.node).sort();
    expect(nodes).toEqual(['node-a', 'node-c']);
  });
});
