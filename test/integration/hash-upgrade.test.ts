import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ContainerStatus, PlanView, StatusDocument } from '../../agent/api/types.js';
import { DockerEngine } from '../../agent/engine/docker.js';
import { silentLogger } from '../../agent/log.js';
import { HASH_SCHEME } from '../../agent/model/hash.js';
import { specHashUnder } from '../../agent/model/hash-schemes.js';
import { allContainers, type ContainerSpec } from '../../agent/model/spec.js';
import { loadDesired } from '../../agent/spec/load.js';
import { call } from '../support/api-http.js';
import { REPO, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, containersOf, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 13 item 5: a spcd upgrade recreates nothing. Containers are created by
 * hand with the labels an older spcd wrote (spec hash scheme v1) and one a
 * newer spcd would write (an unknown scheme); a real spcd adopts the first
 * without a restart, leaves the second alone and says so, and still applies
 * an edit of the first made afterwards.
 */
const sb: Sandbox = sandbox('hashup');
const n = (s: string): string => `${sb.instance}-${s}`;

function setYaml(env = 'one'): string {
  return `
set: app
containers:
  ${n('old')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    environment: { MARK: ${env} }
    stop_grace_period: 1s
  ${n('newer')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
`;
}

let spcd: SpcdProcess | undefined;
const engine = new DockerEngine({ socketPath: '/var/run/docker.sock', log: silentLogger() });

async function definitions(): Promise<ContainerSpec[]> {
  const desired = await loadDesired({
    setsDir: sb.setsDir,
    checkLibraryFile: join(REPO, 'healthchecks/library.yaml'),
  });
  return allContainers(desired.sets);
}

/** What an older (or newer) spcd left behind: created and started with that spcd's labels. */
async function createAsAnotherSpcd(spec: ContainerSpec, specHash: string): Promise<void> {
  const id = await engine.create({
    spec,
    identity: {
      instance: sb.instance,
      set: 'app',
      container: spec.name,
      generation: 1,
      specHash,
      configHash: 'none',
    },
    name: spec.name,
  });
  await engine.start(id);
}

async function get<T>(path: string): Promise<T> {
  const a = await call(sb.socket, 'GET', path);
  expect(a.status).toBe(200);
  return a.json() as T;
}

function statusOf(doc: StatusDocument, name: string): ContainerStatus {
  const c = doc.sets.flatMap((s) => s.containers).find((x) => x.name === name);
  if (!c) throw new Error(`${name} not in status`);
  return c;
}

beforeAll(async () => {
  writeSet(sb, 'app.yaml', setYaml());
  const [old, newer] = await definitions();
  const v1 = specHashUnder('v1', old!);
  if (typeof v1 !== 'string') throw new Error('no v1 hash for the old container');
  await createAsAnotherSpcd(old!, v1);
  await createAsAnotherSpcd(newer!, 'v99-0123456789abcdef0123456789abcdef');
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('a spcd upgrade recreates nothing', () => {
  it('adopts a container of the older scheme as it is and leaves an unknown scheme alone, reporting it', async () => {
    const before = await Promise.all([inspect(n('old')), inspect(n('newer'))]);
    expect(before.every((c) => c?.State.Running)).toBe(true);
    spcd = SpcdProcess.start(sb);
    await spcd.ready();
    const status = await get<StatusDocument>('/v1/status');
    for (const name of [n('old'), n('newer')]) {
      expect(statusOf(status, name)).toMatchObject({ state: 'running', operation: null });
    }
    expect(statusOf(status, n('old')).untouched).toBeUndefined();
    expect(statusOf(status, n('newer')).untouched).toMatch(/newer spcd .*scheme v99/);
    const plan = await get<PlanView>('/v1/plan');
    expect(plan.items).toEqual([]);
    expect(plan.problems).toEqual([
      expect.stringMatching(new RegExp(`^${n('newer')}: labelled by a newer spcd`)),
    ]);
    expect(spcd.logged('container left as it is')).toBe(true);
    const after = await Promise.all([inspect(n('old')), inspect(n('newer'))]);
    expect(after.map((c) => [c?.Id, c?.State.StartedAt])).toEqual(
      before.map((c) => [c?.Id, c?.State.StartedAt]),
    );
    expect(after[0]!.Config.Labels['spcd.spec-hash']).toMatch(/^v1-/);
    expect(await containersOf(sb.instance)).toHaveLength(2);
  });

  it('an edit made after the upgrade still applies: the old-scheme container is replaced, under the new scheme', async () => {
    const before = await inspect(n('old'));
    const newerBefore = await inspect(n('newer'));
    writeSet(sb, 'app.yaml', setYaml('two'));
    spcd!.child.kill('SIGHUP');
    await waitFor(
      'old container replaced',
      async () => {
        const c = await inspect(n('old'));
        return c?.State.Running === true && c.Id !== before!.Id && c.Config.Labels['spcd.generation'] !== '1';
      },
      { timeoutMs: 60_000 },
    );
    const replaced = await inspect(n('old'));
    expect(replaced!.Config.Labels['spcd.spec-hash']).toMatch(new RegExp(`^${HASH_SCHEME}-[0-9a-f]{32}$`));
    const newer = await inspect(n('newer'));
    expect([newer?.Id, newer?.State.StartedAt]).toEqual([newerBefore?.Id, newerBefore?.State.StartedAt]);
  });
});
