import { describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { FleetSlots, SLOT_LABEL } from '../../agent/kube/fleet-slots.js';
import { runFleetUpgrade } from '../../agent/kube/fleet-upgrade.js';
import { FakeClock } from '../support/fake-clock.js';
import { until } from '../support/fake-reconciler.js';
import { NS, fleetSlotStand, log } from '../support/kube-fleet.js';
import { waitFor } from '../support/wait.js';

describe('fleet upgrade slots over Leases (real client-node, in-test API server, fake clock)', () => {
  const { server, api, holderOf, writes, slotsOn } = fleetSlotStand();

  it('50 agents with N = 2: never more than 2 upgrade at once, all end at the new generation', async () => {
    const clock = new FakeClock();
    const prefix = 'fleet50-slot-';
    let inFlight = 0;
    let maxInFlight = 0;
    let finished = 0;
    const generation = new Map<string, number>();
    const agents = Array.from({ length: 50 }, (_, i) => `compute-${String(i).padStart(2, '0')}`);
    for (const n of agents) generation.set(n, 1);

    // Leases far longer than the run: a renewal slowed by the loaded machine never lets a slot expire.
    const all = Promise.all(
      agents.map(async (node) => {
        const slots = new FleetSlots(
          { api: api(), namespace: NS, holder: node, clock, log },
          { slots: 2, leaseDurationSeconds: 3600, renewIntervalMs: 300, prefix },
        );
        await runFleetUpgrade(
          slots,
          async () => {
            inFlight++;
            maxInFlight = Math.max(maxInFlight, inFlight);
            // An upgrade takes 1-2 s of fake time: long enough, in real time, for another node to start.
            await new Promise<void>((r) => clock.setTimer(1000 + Math.floor(Math.random() * 1000), r));
            generation.set(node, 2);
            inFlight--;
          },
          { clock, log, retryMs: 5_000, wakeSpreadMs: 30, startJitterMs: 50 },
        );
        finished++;
      }),
    );
    await until(clock, 'every agent upgraded', () => finished === agents.length, {
      maxFakeMs: 3_000_000,
      realMs: 80_000,
    });
    await all;

    expect(maxInFlight).toBeLessThanOrEqual(2);
    expect(maxInFlight).toBe(2);
    expect([...generation.values()].every((g) => g === 2)).toBe(true);
    const leases = server.list('leases', NS).filter((l) => String(l.metadata.name).startsWith(prefix));
    expect(leases.map((l) => l.metadata.name).sort()).toEqual([`${prefix}0`, `${prefix}1`]);
    // every slot was released at the end
    for (const l of leases) expect((l.spec as { holderIdentity?: string }).holderIdentity).toBeUndefined();
    // the race was real: some creates or updates lost with 409
    const conflicts = server.calls.filter((c) => c.resource === 'leases' && c.status === 409);
    expect(conflicts.length).toBeGreaterThan(0);
    // waiters watched the slots instead of polling
    expect(server.calls.filter((c) => c.resource === 'leases' && c.verb === 'watch').length).toBeGreaterThan(
      0,
    );
  }, 90_000);

  it('a holder that dies (stops renewing, never releases) frees its slot only after expiry', async () => {
    const clock = new FakeClock();
    const prefix = 'dead-slot-';
    const mk = slotsOn(clock, prefix, 1);
    const dead = await mk('node-dead').acquire();
    expect(dead?.name).toBe(`${prefix}0`);
    const other = mk('node-alive');
    expect(await other.acquire()).toBeUndefined();
    clock.advance(29_999);
    expect(await other.acquire()).toBeUndefined();
    clock.advance(2);
    const h = await other.acquire();
    expect(h?.name).toBe(`${prefix}0`);
    const lease = server.get('leases', NS, `${prefix}0`)!;
    expect(lease.spec).toMatchObject({ holderIdentity: 'node-alive', leaseTransitions: 1 });
    expect(lease.metadata.labels).toMatchObject({ [SLOT_LABEL]: 'true' });
    // the dead node, were it to come back, cannot renew a slot it lost
    await mk('node-dead').renew(dead!);
    expect(dead!.state).toBe('lost');
  });

  it('renewal keeps the slot while a long local upgrade runs', async () => {
    const clock = new FakeClock();
    const prefix = 'renew-slot-';
    const mk = (holder: string) =>
      new FleetSlots(
        { api: api(), namespace: NS, holder, clock, log },
        { slots: 1, leaseDurationSeconds: 1, renewIntervalMs: 250, prefix },
      );
    let finish!: () => void;
    const a = runFleetUpgrade(mk('node-a'), () => new Promise<void>((r) => (finish = r)), {
      clock,
      log,
      retryMs: 50,
    });
    await waitFor('node-a holds the slot', () => holderOf(`${prefix}0`) === 'node-a');
    const b = mk('node-b');
    // 2.5 lease durations, one renewal period at a time: each renewal lands, and node-b finds the slot held
    for (let i = 0; i < 10; i++) {
      const before = writes(`${prefix}0`);
      clock.advance(250);
      await waitFor(`renewal ${i + 1} written`, () => writes(`${prefix}0`) > before);
      expect(await b.acquire()).toBeUndefined();
    }
    finish();
    await a;
    expect(holderOf(`${prefix}0`)).toBeUndefined();
    const h = await b.acquire();
    expect(h?.name).toBe(`${prefix}0`);
  });

  it('releases the slot when the local upgrade fails, and passes the failure on', async () => {
    const clock = new FakeClock();
    const slots = slotsOn(clock, 'fail-slot-', 1, undefined, 60)('node-f');
    await expect(
      runFleetUpgrade(
        slots,
        async () => {
          throw new Error('health gate failed');
        },
        { clock, log },
      ),
    ).rejects.toThrow('health gate failed');
    expect(holderOf('fail-slot-0')).toBeUndefined();
    const view = await slots.snapshot();
    expect(view.find((v) => v.name === 'fail-slot-0')?.holder).toBeNull();
  });

  it('with the API server unreachable no upgrade starts (KUBE_UNAVAILABLE)', async () => {
    const clock = new FakeClock();
    const slots = slotsOn(clock, 'down-slot-', 2, undefined, 10)('node-u');
    let started = false;
    let ended: unknown;
    server.unavailable = true;
    try {
      const run = runFleetUpgrade(
        slots,
        async () => {
          started = true;
        },
        { clock, log, retryMs: 10 },
      ).catch((e: unknown) => e);
      void run.then((e) => (ended = e ?? 'resolved'));
      await until(clock, 'the upgrade refused', () => ended !== undefined, { realMs: 30_000 });
      expect(isSpcdError(ended, 'KUBE_UNAVAILABLE')).toBe(true);
    } finally {
      server.unavailable = false;
    }
    expect(started).toBe(false);
  });
});
