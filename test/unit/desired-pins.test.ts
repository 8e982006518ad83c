import { describe, expect, it } from 'vitest';
import { desiredContainers, stalePins } from '../../agent/planner/pins.js';
import { specHash } from '../../agent/model/hash.js';
import type { ContainerSpec, DesiredState } from '../../agent/model/spec.js';
import type { ContainerRecord, StateStore } from '../../agent/state/store.js';
import { GOLDEN_V1, RICH } from '../support/spec.js';

const onDisk = (c: ContainerSpec): DesiredState => ({
  sets: [
    { name: 's', path: 's', description: '', defaults: {}, containers: [c], sets: [], source: 's.yaml:1' },
  ],
});

const pinned = (spec: ContainerSpec, definitionHash: string): Pick<StateStore, 'record'> => ({
  record: (name: string): ContainerRecord | undefined =>
    name === spec.name
      ? {
          nextGeneration: 3,
          lastKnownGood: 2,
          heldStopped: false,
          generations: [],
          pin: { spec, definitionHash },
        }
      : undefined,
});

const rolledBack = { ...RICH, image: 'registry.local/kolla/nova-libvirt:2023.2' };
const none = (): string => 'none';

describe('operator pins across a spcd upgrade (issue 13 item 5)', () => {
  it('a pin set by an older spcd (v1 definition hash) stays pinned while the definition is unchanged', () => {
    const store = pinned(rolledBack, GOLDEN_V1.rich);
    const [d] = desiredContainers(onDisk(RICH), store, none);
    expect(d!.spec.image).toBe(rolledBack.image);
    expect(d!.specHash).toBe(specHash(rolledBack));
    expect(stalePins(onDisk(RICH), store)).toEqual([]);
  });

  it('drops it once the definition is edited after the upgrade', () => {
    const edited = { ...RICH, environment: { TZ: 'CET' } };
    const store = pinned(rolledBack, GOLDEN_V1.rich);
    expect(desiredContainers(onDisk(edited), store, none)[0]!.spec).toBe(edited);
    expect(stalePins(onDisk(edited), store)).toEqual([RICH.name]);
  });

  it('keeps a pin whose hash has a scheme this spcd does not know (a newer spcd set it)', () => {
    const store = pinned(rolledBack, 'v9-abc');
    expect(desiredContainers(onDisk(RICH), store, none)[0]!.spec.image).toBe(rolledBack.image);
    expect(stalePins(onDisk(RICH), store)).toEqual([]);
  });
});
