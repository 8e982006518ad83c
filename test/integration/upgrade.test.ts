import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { cleanupInstance, docker, inspect } from '../support/docker.js';
import { LocalRegistry } from '../support/registry.js';
import { UpgradeHarness } from '../support/upgrade-harness.js';

/**
 * The upgrade transaction in-process on a real engine, with images pulled
 * from a real local registry: a good upgrade moves N -> N+1 with the digest
 * recorded; a bad image is rolled back automatically with the registry down.
 */
interface GateCause {
  message: string;
  details: {
    lastResults: { lastResult: { timedOut: boolean; exitCode: number | null; output: string } | null }[];
  };
}

let h: UpgradeHarness;
let reg: LocalRegistry;

const body = (image: string, checks = true): string => `
image: ${image}
command: [demo-service, sleep]
network: none
stop_grace_period: 1s
${
  checks
    ? `healthchecks:
  - { name: demo, exec: [demo-check], interval: 2s, timeout: 1s, failure_threshold: 1 }`
    : ''
}`;

beforeAll(async () => {
  h = await UpgradeHarness.create('upgrade', { gateDeadlineMs: 20_000, minReadyMs: 500 });
  reg = LocalRegistry.start(join(h.root, 'registry'));
  reg.push('1', '2', 'crash', 'unhealthy', 'hang');
});

afterAll(async () => {
  await h?.close();
  if (h) await cleanupInstance(h.instance);
  reg?.stop();
  await reg?.removeLocalTags();
});

async function fresh(
  name: string,
  checks = true,
): Promise<{ spec: ContainerSpec; id: string; startedAt: string }> {
  const spec = await h.spec(name, body(reg.ref('1'), checks));
  const id = await h.createFirst(spec);
  const c = await inspect(id);
  return { spec, id, startedAt: c!.State.StartedAt };
}

describe('upgrade from a real registry', () => {
  it('moves the generation from N to N+1 and records the pulled digest', async () => {
    const name = `${h.instance}-svc`;
    const first = await fresh(name);
    expect(h.state.record(name)?.lastKnownGood).toBe(1);
    await reg.forgetLocally('2');
    const spec2 = { ...first.spec, image: reg.ref('2') };
    const r = await h.upgrade(spec2);
    expect(r.generation).toBe(2);
    expect(r.previousGeneration).toBe(1);
    expect(r.imageDigest).toMatch(new RegExp(`^${reg.host}/kolla/demo-service@sha256:[0-9a-f]{64}$`));
    // state
    const rec = h.state.record(name)!;
    expect(rec.lastKnownGood).toBe(2);
    const g2 = rec.generations.find((g) => g.generation === 2)!;
    expect(g2.outcome).toBe('current');
    expect(g2.imageDigest).toBe(r.imageDigest);
    expect(rec.generations.find((g) => g.generation === 1)!.outcome).toBe('superseded');
    // engine: one instance, under the stable name, labelled N+1, running the digest's image
    const all = await h.instances(name);
    expect(all).toHaveLength(1);
    const c = await inspect(name);
    expect(c!.Id).toBe(r.containerId);
    expect(c!.State.Running).toBe(true);
    expect(c!.Config.Labels['spcd.generation']).toBe('2');
    const byDigest = (await docker().getImage(r.imageDigest!).inspect()) as { Id: string };
    expect((c as unknown as { Image: string }).Image).toBe(byDigest.Id);
    expect(r.window).not.toBeNull();
    expect(r.window!.stopToRunningMs).toBeGreaterThan(0);
    expect(r.window!.stopToHealthyMs).toBeGreaterThanOrEqual(r.window!.stopToRunningMs);
    expect(h.journalFiles()).toEqual([]);
  });

  for (const [tag, checks, code] of [
    ['crash', false, 'HEALTH_GATE_FAILED'],
    ['unhealthy', true, 'HEALTH_GATE_FAILED'],
    ['hang', true, 'HEALTH_GATE_FAILED'],
  ] as const) {
    it(`rolls back an image that ${tag === 'crash' ? 'cannot start' : tag === 'unhealthy' ? 'never gets healthy' : 'has a hanging check'} (:${tag}) with the registry stopped`, async () => {
      const name = `${h.instance}-${tag}`;
      const first = await fresh(name, checks);
      await reg.forgetLocally(tag);
      // The registry goes away the moment the new generation is created: the rollback must not need it.
      let stopped = false;
      const off = h.events.subscribe((e) => {
        if (
          e.type === 'upgrade-step' &&
          e.container === name &&
          e.step === 'create' &&
          e.outcome === 'begin'
        ) {
          reg.stop();
          stopped = true;
        }
      });
      const t0 = Date.now();
      let err: unknown;
      try {
        await h.upgrade({ ...first.spec, image: reg.ref(tag) });
      } catch (e) {
        err = e;
      } finally {
        off();
      }
      const took = Date.now() - t0;
      expect(stopped).toBe(true);
      expect(isSpcdError(err), String(err)).toBe(true);
      expect((err as { code: string }).code).toBe(code);
      const details = (err as { details: { rolledBackTo: number; cause: GateCause } }).details;
      expect(details.rolledBackTo).toBe(1);
      if (tag === 'crash') expect(details.cause.message).toMatch(/exited with 1 before it was ready/);
      else {
        // failed by its check, not by the gate deadline
        expect(details.cause.message).toMatch(/a check turned unhealthy/);
        const last = details.cause.details.lastResults[0]!.lastResult!;
        if (tag === 'hang') expect(last.timedOut).toBe(true);
        else expect([last.exitCode, last.output.trim()]).toEqual([1, 'demo-check: unhealthy on purpose']);
      }
      // The old generation runs again, under its name, and it is the only instance.
      const all = await h.instances(name);
      expect(all.map((o) => [o.name, o.identity.generation, o.state])).toEqual([[name, 1, 'running']]);
      expect(all[0]!.id).toBe(first.id);
      const rec = h.state.record(name)!;
      expect(rec.generations.find((g) => g.generation === 2)!.outcome).toBe('rolled-back');
      expect(rec.lastKnownGood).toBe(1);
      expect(h.journalFiles()).toEqual([]);
      // the registry is really down
      expect(
        await fetch(`http://${reg.host}/v2/`).then(
          () => 'up',
          () => 'down',
        ),
      ).toBe('down');
      reg.restart();
      console.log(`rollback of :${tag}: ${took} ms`);
    });
  }
});
