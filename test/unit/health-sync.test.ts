import { describe, expect, it } from 'vitest';
import type { ObservedContainer } from '../../agent/model/observed.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { HealthSync, type SyncItem } from '../../agent/reconciler/health-sync.js';
import { FakeClock } from '../support/fake-clock.js';
import { FakeHealthRoom } from '../support/fake-reconciler.js';
import { amqpCheck, containerSpec } from '../support/spec.js';

/** Health sync is the only owner of health watches: the passes' and the operations' (the executor's HealthGate). */
const SPEC: ContainerSpec = containerSpec('svc', { healthchecks: [amqpCheck('svc')] });
const PLAIN = containerSpec('plain');

const running = (id: string, startedAt = '2026-01-01T00:00:00.000Z'): ObservedContainer => ({
  id,
  name: 'svc',
  identity: { instance: 'i', set: 's', container: 'svc', generation: 1, specHash: 'h', configHash: 'none' },
  state: 'running',
  image: 'img:1',
  imageId: 'sha256:1',
  startedAt,
  finishedAt: '',
  exitCode: 0,
  pid: 42,
});

function setup(): { room: FakeHealthRoom; sync: HealthSync; pass: (...items: SyncItem[]) => void } {
  const room = new FakeHealthRoom();
  const sync = new HealthSync(room, new FakeClock());
  return { room, sync, pass: (...items) => sync.sync(items) };
}

describe('health sync', () => {
  it('watches running containers with checks once per started instance, and drops the others', () => {
    const { room, pass } = setup();
    pass(
      { spec: SPEC, primary: running('a'), locked: false },
      { spec: PLAIN, primary: undefined, locked: false },
    );
    expect(room.placed).toEqual(['svc@a']);
    expect(room.watches.get('svc')).toMatchObject({
      containerId: 'a',
      pid: 42,
      startedAtMs: Date.parse('2026-01-01T00:00:00.000Z'),
    });
    pass({ spec: SPEC, primary: running('a'), locked: false });
    expect(room.placed).toEqual(['svc@a']);
    // Restarted: same id, a new start, a fresh watch.
    pass({ spec: SPEC, primary: running('a', '2026-01-01T00:01:00.000Z'), locked: false });
    expect(room.placed).toEqual(['svc@a', 'svc@a']);
    pass({ spec: SPEC, primary: undefined, locked: false });
    expect(room.watches.has('svc')).toBe(false);
  });

  it('leaves a locked container to its operation; the first free pass re-places what the operation watched', () => {
    const { room, sync, pass } = setup();
    pass({ spec: SPEC, primary: running('old'), locked: false });
    // The upgrade's gate points the watch at the new instance through the same object.
    sync.watchInstance(SPEC, running('new'));
    pass({ spec: SPEC, primary: running('new'), locked: true });
    expect(room.placed).toEqual(['svc@old', 'svc@new']);
    pass({ spec: SPEC, primary: running('new'), locked: false });
    expect(room.placed).toEqual(['svc@old', 'svc@new', 'svc@new']);
  });

  it("a rollback that re-points the watch at the instance the pass watched keeps it the pass's own", () => {
    const { room, sync, pass } = setup();
    pass({ spec: SPEC, primary: running('old'), locked: false });
    sync.watchInstance(SPEC, running('new'));
    sync.watchInstance(SPEC, running('old'));
    expect(room.placed).toEqual(['svc@old', 'svc@new', 'svc@old']);
    pass({ spec: SPEC, primary: running('old'), locked: false });
    expect(room.placed).toEqual(['svc@old', 'svc@new', 'svc@old']);
  });

  it("an operation's unwatch is remembered: the next free pass watches again", () => {
    const { room, sync, pass } = setup();
    pass({ spec: SPEC, primary: running('a'), locked: false });
    sync.unwatch('svc');
    expect(room.watches.has('svc')).toBe(false);
    pass({ spec: SPEC, primary: running('a'), locked: false });
    expect(room.watches.get('svc')?.containerId).toBe('a');
  });
});
