import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSpcdError, type SpcdError } from '../../agent/errors.js';
import type { PullPolicy } from '../../agent/executor/image.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { LocalRegistry } from '../support/registry.js';
import { UpgradeHarness } from '../support/upgrade-harness.js';

/**
 * Pull failures against a real registry with htpasswd auth: each one is a
 * clear typed error raised before anything is touched (same container id,
 * same StartedAt, no generation allocated, empty journal).
 */
const USER = 'spcd';
const PASS = 'right-horse-battery';
let h: UpgradeHarness;
let reg: LocalRegistry;
let spec: ContainerSpec;
let name: string;
let goodAuth: string;
let badAuth: string;

beforeAll(async () => {
  h = await UpgradeHarness.create('upgreg', { minReadyMs: 300 });
  reg = LocalRegistry.start(join(h.root, 'registry'), { auth: { user: USER, pass: PASS } });
  reg.push('1', '2', '3');
  goodAuth = reg.writeAuthFile(join(h.root, 'auth-good.json'), USER, PASS);
  badAuth = reg.writeAuthFile(join(h.root, 'auth-bad.json'), USER, 'wrong-password');
  h.withAuthFile(goodAuth);
  name = `${h.instance}-svc`;
  spec = await h.spec(
    name,
    `
image: ${reg.ref('1')}
command: [demo-service, sleep]
network: none
stop_grace_period: 1s`,
  );
  await h.createFirst(spec); // pulled from the auth registry with the good credentials
});

afterAll(async () => {
  await h?.close();
  if (h) await cleanupInstance(h.instance);
  reg?.stop();
  await reg?.removeLocalTags();
});

async function untouched(
  fn: () => Promise<unknown>,
): Promise<{ err: SpcdError; before: { id: string; startedAt: string } }> {
  const c0 = await inspect(name);
  const next0 = h.state.record(name)!.nextGeneration;
  let err: unknown;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  expect(isSpcdError(err), `expected a typed error, got ${String(err)}`).toBe(true);
  const c1 = await inspect(name);
  expect(c1!.Id).toBe(c0!.Id);
  expect(c1!.State.Running).toBe(true);
  expect(c1!.State.StartedAt).toBe(c0!.State.StartedAt);
  expect(await h.instances(name)).toHaveLength(1);
  expect(h.state.record(name)!.nextGeneration).toBe(next0);
  expect(h.journalFiles()).toEqual([]);
  console.log(`${(err as SpcdError).code}: ${(err as SpcdError).message}`);
  return { err: err as SpcdError, before: { id: c0!.Id, startedAt: c0!.State.StartedAt } };
}

const to = (tag: string, pull: PullPolicy = 'always', expectDigest?: string): Promise<unknown> =>
  h.upgrade({ ...spec, image: reg.ref(tag) }, { pull, ...(expectDigest ? { expectDigest } : {}) });

describe('pull failures leave the running container untouched', () => {
  it('a registry that is down', async () => {
    reg.stop();
    try {
      const { err } = await untouched(() => to('2'));
      expect(err.code).toBe('IMAGE_PULL_FAILED');
      expect(err.details.image).toBe(reg.ref('2'));
    } finally {
      reg.restart();
    }
  });

  it('a missing tag', async () => {
    const { err } = await untouched(() => to('no-such-tag'));
    expect(err.code).toBe('IMAGE_PULL_FAILED');
    expect(err.message).toContain(reg.ref('no-such-tag'));
  });

  it('bad credentials', async () => {
    h.withAuthFile(badAuth);
    try {
      const { err } = await untouched(() => to('2'));
      expect(err.code).toBe('IMAGE_PULL_FAILED');
      expect(err.message).toMatch(/unauthorized|authentication required/i);
    } finally {
      h.withAuthFile(goodAuth);
    }
  });

  it('no credentials at all for a registry that wants them', async () => {
    h.withAuthFile(undefined);
    try {
      const { err } = await untouched(() => to('2'));
      expect(err.code).toBe('IMAGE_PULL_FAILED');
    } finally {
      h.withAuthFile(goodAuth);
    }
  });

  it('a digest that is not the pinned one', async () => {
    const wrong = `sha256:${'0'.repeat(64)}`;
    const { err } = await untouched(() => to('2', 'always', wrong));
    expect(err.code).toBe('IMAGE_DIGEST_MISMATCH');
    expect(err.details.expected).toBe(wrong);
    expect(String(err.details.digest)).toMatch(/@sha256:[0-9a-f]{64}$/);
  });

  it('and with the right credentials and the right digest (bare sha256:) the same upgrade goes through', async () => {
    const probe = await h.upgrade({ ...spec, image: reg.ref('2') }, { pull: 'always' }).catch((e) => e);
    // Learn the digest from the first pull, then pin it for a second upgrade to :2 again (a recreate).
    expect(isSpcdError(probe)).toBe(false);
    const digest = String((probe as { imageDigest: string }).imageDigest);
    const bare = digest.slice(digest.indexOf('@') + 1);
    const r = await h.upgrade(
      { ...spec, image: reg.ref('2'), environment: { PINNED: '1' } },
      {
        pull: 'always',
        expectDigest: bare,
      },
    );
    expect(r.imageDigest).toBe(digest);
    expect((await inspect(name))!.Config.Labels['spcd.generation']).toBe(String(r.generation));
  });
});
