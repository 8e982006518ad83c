import { describe, expect, it } from 'vitest';
import { imagePuller } from '../../agent/executor/pre-pull.js';
import { parseImagePolicy } from '../../agent/spec/image-policy.js';
import { FakeProcess } from '../support/fake-executor.js';

const NOVA = 'registry.example.com/kolla/nova:2';
const OVS = 'registry.example.com/kolla/ovs:2';

describe('the image puller', () => {
  it('pulls each missing image once, leaving a present one alone', async () => {
    const p = await FakeProcess.create();
    try {
      p.engine.addImage(NOVA);
      p.engine.addRemoteImage(OVS);
      await imagePuller(p.deps).prePull([NOVA, OVS, OVS], 'op-1');
      expect(p.engine.count('pull')).toBe(1);
      expect(await p.engine.imageInfo(OVS)).toBeDefined();
      expect(p.events).toContainEqual(
        expect.objectContaining({ type: 'pull-progress', operationId: 'op-1', image: OVS }),
      );
    } finally {
      await p.close();
    }
  });

  it('stops at an image the policy refuses, pulling none after it', async () => {
    const p = await FakeProcess.create();
    try {
      p.engine.addRemoteImage(OVS);
      const deps = {
        ...p.deps,
        imagePolicy: parseImagePolicy('allow: [registry.example.com/kolla]', 'p.yaml'),
      };
      await expect(imagePuller(deps).prePull(['evil.example/x:1', OVS], 'op-2')).rejects.toMatchObject({
        code: 'IMAGE_REFUSED',
      });
      expect(p.engine.count('pull')).toBe(0);
    } finally {
      await p.close();
    }
  });
});
