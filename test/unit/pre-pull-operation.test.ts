import { describe, expect, it } from 'vitest';
import { trackedPrePull } from '../../agent/daemon/pre-pull-operation.js';
import { imagePuller } from '../../agent/executor/pre-pull.js';
import { silentLogger } from '../../agent/log.js';
import type { SpcdEvent } from '../../agent/model/events.js';
import { Operations } from '../../agent/reconciler/operations.js';
import { parseImagePolicy } from '../../agent/spec/image-policy.js';
import { FakeProcess } from '../support/fake-executor.js';
import { desired, fakeReconciler, until } from '../support/fake-reconciler.js';
import { containerSpec } from '../support/spec.js';

/**
 * A pre-pull runs under an operation of its own (kind `pre-pull`), recorded
 * and published by the owner of operations as the operator's verbs are.
 * Fake engine, fake clock; nothing sleeps.
 */
const NOVA = 'registry.example.com/kolla/nova:2';
const OVS = 'registry.example.com/kolla/ovs:2';
const V1 = containerSpec('svc', { image: 'img:1' });

const ofOperation = (events: SpcdEvent[], id: string): string[] =>
  events.flatMap((e) => {
    if (e.type === 'operation' && e.operationId === id) return [e.phase];
    if (e.type === 'pull-progress' && e.operationId === id) return [`pull ${e.image}`];
    return [];
  });

async function withProcess(fn: (p: FakeProcess, ops: Operations) => Promise<void>): Promise<void> {
  const p = await FakeProcess.create();
  try {
    await fn(p, new Operations({ events: p.bus, clock: p.clock, log: silentLogger() }));
  } finally {
    await p.close();
  }
}

describe('a pre-pull is an operation', () => {
  it('of kind pre-pull: accepted, its pulls under its id, then succeeded with the images; done(id) knows it', () =>
    withProcess(async (p, ops) => {
      p.engine.addImage(NOVA);
      p.engine.addRemoteImage(OVS);
      const { ref, running } = trackedPrePull(imagePuller(p.deps), ops)([NOVA, OVS, OVS]);
      expect(ref).toMatchObject({ kind: 'pre-pull', target: 'images' });
      expect(ref.operationId).toMatch(/^pre-pull-/);
      await running;
      expect(p.engine.count('pull')).toBe(1);
      expect(await ops.done(ref.operationId)).toMatchObject({
        phase: 'succeeded',
        kind: 'pre-pull',
        result: { images: [NOVA, OVS] },
      });
      const story = ofOperation(p.events, ref.operationId);
      expect(story[0]).toBe('accepted');
      expect(story).toContain(`pull ${OVS}`);
      expect(story.at(-1)).toBe('succeeded');
    }));

  it('its failure is the caller’s and is recorded on the operation, pulling nothing after it', () =>
    withProcess(async (p, ops) => {
      p.engine.addRemoteImage(OVS);
      const deps = {
        ...p.deps,
        imagePolicy: parseImagePolicy('allow: [registry.example.com/kolla]', 'p.yaml'),
      };
      const { ref, running } = trackedPrePull(imagePuller(deps), ops)(['evil.example/x:1', OVS]);
      await expect(running).rejects.toMatchObject({ code: 'IMAGE_REFUSED' });
      expect(p.engine.count('pull')).toBe(0);
      // The refusal is told under the operation, after it was accepted.
      const told = p.events.flatMap((e) =>
        (e.type === 'operation' || e.type === 'image-refused') && e.operationId === ref.operationId
          ? [e.type === 'operation' ? e.phase : e.type]
          : [],
      );
      expect(told).toEqual(['accepted', 'image-refused', 'failed']);
      expect(await ops.done(ref.operationId)).toMatchObject({
        phase: 'failed',
        error: { code: 'IMAGE_REFUSED' },
      });
      expect(p.events).toContainEqual(
        expect.objectContaining({
          type: 'operation',
          operationId: ref.operationId,
          phase: 'failed',
          error: expect.objectContaining({ code: 'IMAGE_REFUSED' }),
        }),
      );
    }));

  it('takes no container lock: it runs while an operation has the container locked', async () => {
    const p = await FakeProcess.create();
    const { rec } = fakeReconciler(p);
    try {
      p.engine.addImage(V1.image);
      p.engine.addRemoteImage('img:2');
      await rec.start([desired(V1)]);
      await until(
        p.clock,
        'running, no operation on it',
        () => rec.primary('svc')?.state === 'running' && rec.factsOf('svc').operation === null,
      );
      p.engine.fault({ kind: 'stop', nth: 1, hang: true });
      const restart = rec.request('svc', { verb: 'restart', operation: { id: 'r-1', kind: 'restart' } });
      await until(p.clock, 'the restart has it locked', () => p.engine.hanging().includes('stop'));
      expect(rec.factsOf('svc').operation?.id).toBe('r-1');
      // The container's next image, pulled while its restart has it locked.
      const { ref, running } = trackedPrePull(imagePuller(p.deps), rec.operations)(['img:2']);
      await running;
      expect(await p.engine.imageInfo('img:2')).toBeDefined();
      expect(await rec.operations.done(ref.operationId)).toMatchObject({ phase: 'succeeded' });
      expect(rec.factsOf('svc').operation?.id).toBe('r-1');
      p.engine.answerHung('stop');
      await restart;
    } finally {
      p.engine.answerHung();
      await rec.stop();
      await p.close();
    }
  });
});
