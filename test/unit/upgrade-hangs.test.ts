import { afterEach, describe, expect, it } from 'vitest';
import { upgradeContainer } from '../../agent/executor/upgrade.js';
import type { CallKind } from '../support/fake-engine.js';
import { FakeProcess } from '../support/fake-executor.js';
import { engineView, NEXT, OLD, upgradeTo } from '../support/upgrade-fixture.js';
import { waitFor } from '../support/wait.js';

/**
 * Each engine call of the upgrade transaction hanging until its deadline
 * (the fake engine then ends it with ENGINE_TIMEOUT, as withDeadline does):
 * the upgrade fails with a typed error, the old generation runs under its
 * name, no journal entry and no generation are left in progress.
 * test/unit/upgrade-steps.test.ts has each step failing, and the stop hanging.
 */
let proc: FakeProcess | undefined;
afterEach(async () => {
  await proc?.close();
  proc = undefined;
});

const CASES: {
  call: string;
  kind: CallKind;
  nth: number;
  code: string;
  /** Generation 2's outcome afterwards; null: never allocated. */
  outcome: string | null;
}[] = [
  { call: 'the image lookup', kind: 'imageInfo', nth: 1, code: 'ENGINE_TIMEOUT', outcome: null },
  { call: 'the create', kind: 'create', nth: 1, code: 'ENGINE_TIMEOUT', outcome: 'failed' },
  { call: 'renaming the old aside', kind: 'rename', nth: 1, code: 'UPGRADE_FAILED', outcome: 'rolled-back' },
  { call: 'renaming the new in', kind: 'rename', nth: 2, code: 'UPGRADE_FAILED', outcome: 'rolled-back' },
  { call: 'starting the new', kind: 'start', nth: 1, code: 'UPGRADE_FAILED', outcome: 'rolled-back' },
];

describe('an upgrade call that hangs until its deadline', () => {
  for (const c of CASES) {
    it(`${c.call}: ${c.code}, generation 1 runs under the name, nothing in progress`, async () => {
      const p = await FakeProcess.create();
      proc = p;
      const old = await p.first(OLD);
      p.engine.addImage(NEXT.image);
      p.engine.fault({ kind: c.kind, nth: c.nth, hang: true });
      const done = upgradeContainer(p.deps, upgradeTo(old)).catch((e: unknown) => e);
      await waitFor('the call hangs', () => p.engine.hanging().length > 0, {
        timeoutMs: 5_000,
        intervalMs: 1,
      });
      expect(p.engine.hanging()).toEqual([c.kind]);
      p.engine.releaseHung();
      expect(await done).toMatchObject({ code: c.code });
      expect(engineView(p)).toEqual(['svc:running:g1']);
      expect((await p.deps.journal.scan()).entries).toEqual([]);
      expect(p.deps.state.generation('svc', 2)?.outcome ?? null).toBe(c.outcome);
      expect(p.deps.state.generation('svc', 1)?.outcome).toBe('current');
      expect(p.engine.hanging()).toEqual([]);
    });
  }
});
