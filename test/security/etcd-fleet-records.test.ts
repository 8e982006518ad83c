import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Etcd3 } from 'etcd3';
import { connectEtcd } from '../../agent/etcd/client.js';
import { EtcdRolloutBackend } from '../../agent/etcd/rollout-backend.js';
import { createLogger } from '../../agent/log.js';
import { systemClock } from '../../agent/model/clock.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { waitFor } from '../support/wait.js';

/**
 * Attacks on the rollout's shared records in etcd by one node (its own
 * credentials, or a hand-written key): a slot held forever by a queue key
 * no lease binds, a ledger forged so that it reads as empty (the canaries
 * and failures it holds forgotten), and reports that inflate the fleet size
 * a failure percentage is taken of. Real etcd, spcd's own backend.
 */
const PREFIX = `/spcd-secrec-${process.pid}/`;
const log = createLogger({ level: 'silent' });
let cluster: EtcdCluster;
let client: Etcd3;
let backend: EtcdRolloutBackend;

beforeAll(async () => {
  cluster = await EtcdCluster.start(1);
  client = connectEtcd({ endpoints: cluster.endpoints() });
  backend = new EtcdRolloutBackend({
    client,
    prefix: PREFIX,
    node: 'node-a',
    slotTtlSeconds: 10,
    clock: systemClock,
    log,
  });
}, 120_000);

afterAll(async () => {
  await backend?.close();
  client?.close();
  await cluster?.stop();
});

describe("a node's forged fleet records", { timeout: 60_000 }, () => {
  it('a queue key without a lease holds no slot', async () => {
    // node-b's own queue prefix, but bound to no lease: etcd would never expire it
    await client.put(`${PREFIX}queue/node-b/1`).value(JSON.stringify({ node: 'node-b' }));
    const ac = new AbortController();
    let held = false;
    const slot = backend.withSlot(1, ac.signal, () => {
      held = true;
      return Promise.resolve('held');
    });
    try {
      await waitFor('node-a holds the one slot', () => held, { timeoutMs: 15_000 });
      expect(await slot).toBe('held');
    } finally {
      ac.abort();
      await slot.catch(() => undefined);
    }
  });

  it('a malformed ledger is an error, not an empty ledger', async () => {
    await client.put(`${PREFIX}rollout/ledger`).value('{"rollout":"r1","canaries":');
    await expect(backend.readLedger()).rejects.toMatchObject({
      code: 'FLEET_RECORD_INVALID',
      details: { key: `${PREFIX}rollout/ledger` },
    });
    await client.put(`${PREFIX}rollout/ledger`).value(JSON.stringify({ rollout: 'r1' }));
    await expect(backend.readLedger()).rejects.toMatchObject({ code: 'FLEET_RECORD_INVALID' });
  });

  it("a report counts in the fleet size only under its own node's key", async () => {
    const report = (node: string) => JSON.stringify({ node, rollout: 'r1', phase: 'done', since: 0 });
    await backend.writePhase({ node: 'node-a', rollout: 'r1', phase: 'done', since: 0 });
    // node-b's key (its role may write it) speaking for nodes that do not exist
    await client.put(`${PREFIX}nodes/node-b`).value(report('ghost-1'));
    await client.put(`${PREFIX}nodes/node-c`).value(report('node-c'));
    const nodes = (await backend.listPhases()).map((p) => p.node).sort();
    expect(nodes).toEqual(['node-a', 'node-c']);
  });
});
