import { describe, expect, it } from 'vitest';
import { clearStalePins, desiredContainers, type PinRecords } from '../../agent/planner/pins.js';
import { specHash } from '../../agent/model/hash.js';
import type { ContainerSpec, DesiredState } from '../../agent/model/spec.js';
import { RICH } from '../support/spec.js';

const onDisk = (...containers: ContainerSpec[]): DesiredState => ({
  sets: [{ name: 's', path: 's', description: '', defaults: {}, containers, sets: [], source: 's.yaml:1' }],
});

type Pin = { spec: ContainerSpec; definitionHash: string };

/** A store of pins at the boundary: what was read, and each write in order. */
function fakePins(initial: Record<string, Pin>): PinRecords & { pins: Map<string, Pin>; writes: string[] } {
  const pins = new Map(Object.entries(initial));
  const writes: string[] = [];
  return {
    pins,
    writes,
    record: (name) => ({ pin: pins.get(name) }),
    setPin: async (name) => {
      writes.push(name);
      pins.delete(name);
    },
  };
}

const upgraded = { ...RICH, image: 'registry.local/kolla/nova-libvirt:2024.2' };
const other = { ...RICH, name: 'nova_compute', image: 'registry.local/kolla/nova-compute:2023.2' };
const none = (): string => 'none';

describe('clearing stale pins', () => {
  it('clears the pin whose definition changed on disk and answers its name', async () => {
    const store = fakePins({ [RICH.name]: { spec: upgraded, definitionHash: specHash(RICH) } });
    const edited = { ...RICH, environment: { TZ: 'CET' } };
    expect(await clearStalePins(onDisk(edited), store)).toEqual([RICH.name]);
    expect(store.pins.has(RICH.name)).toBe(false);
    expect(desiredContainers(onDisk(edited), store, none)[0]!.spec).toBe(edited);
  });

  it('leaves a pin whose definition is unchanged, writing nothing', async () => {
    const store = fakePins({ [RICH.name]: { spec: upgraded, definitionHash: specHash(RICH) } });
    expect(await clearStalePins(onDisk(RICH), store)).toEqual([]);
    expect(store.writes).toEqual([]);
    expect(desiredContainers(onDisk(RICH), store, none)[0]!.spec).toBe(upgraded);
  });

  it('clears only the stale ones, in the order of the definitions', async () => {
    const store = fakePins({
      [RICH.name]: { spec: upgraded, definitionHash: specHash(RICH) },
      [other.name]: { spec: { ...other, image: 'x:1' }, definitionHash: specHash(other) },
    });
    const editedOther = { ...other, environment: { TZ: 'CET' } };
    expect(await clearStalePins(onDisk(RICH, editedOther), store)).toEqual([other.name]);
    expect([...store.pins.keys()]).toEqual([RICH.name]);
  });

  it('stops at a write that fails, the error its own', async () => {
    const store = fakePins({ [RICH.name]: { spec: upgraded, definitionHash: specHash(RICH) } });
    store.setPin = async () => {
      throw new Error('disk full');
    };
    await expect(clearStalePins(onDisk({ ...RICH, environment: { TZ: 'CET' } }), store)).rejects.toThrow(
      'disk full',
    );
  });
});
