import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readlinkSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ContainerStatus, StatusDocument } from '../../agent/api/types.js';
import { call } from '../support/api-http.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, docker, inspect, ENGINE_CLI } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * Journal recovery through the real daemon on a real engine, entry by entry:
 * an entry whose old instance was removed and a malformed entry are each
 * quarantined (status, log line), spcd starts and keeps supervising the other
 * containers (a killed one is healed), the quarantined ones keep their
 * instance and are left alone, and removing the files + SIGHUP clears them.
 * Then a failing upgrade whose config changed: after the rollback the old
 * generation runs its own config (the `current` link and the mounted file),
 * and the reconciler does not retry the failed target.
 */
const sb: Sandbox = sandbox('quarantine');
const n = (s: string): string => `${sb.instance}-${s}`;
const templates = join(sb.root, 'templates');
const globals = join(sb.root, 'globals.yaml');
const configRoot = join(sb.root, 'config');
const journalFile = (name: string): string =>
  join(sb.stateDir, 'journal', `${encodeURIComponent(name)}.json`);

const plain = (name: string): string => `
  ${n(name)}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s`;

const setYaml = (cfgImage = 'spcd-demo/service:1'): string => `
set: q
containers:${plain('gone')}${plain('bad')}${plain('other')}
  ${n('cfg')}:
    image: ${cfgImage}
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
    config:
      - { template: cfg.conf.j2, dest: cfg.conf, container_path: /etc/cfg/cfg.conf, mode: '0644' }
`;

let spcd: SpcdProcess | undefined;
const start = async (): Promise<SpcdProcess> => {
  const p = SpcdProcess.start(sb, [
    '--templates',
    templates,
    '--globals',
    globals,
    '--config-root',
    configRoot,
  ]);
  await p.ready();
  return p;
};

async function status(name: string): Promise<ContainerStatus> {
  const doc = (await call(sb.socket, 'GET', '/v1/status')).json() as StatusDocument;
  const c = doc.sets.flatMap((s) => s.containers).find((x) => x.name === n(name));
  if (!c) throw new Error(`${n(name)} not in the status`);
  return c;
}

const running = async (name: string): Promise<boolean> => (await inspect(n(name)))?.State.Running === true;

beforeAll(async () => {
  mkdirSync(templates);
  writeFileSync(join(templates, 'cfg.conf.j2'), 'level = {{ level }}\n');
  writeFileSync(globals, 'level: 1\n');
  writeSet(sb, 'q.yaml', setYaml());
  spcd = await start();
  await waitFor('four running', async () => {
    for (const s of ['gone', 'bad', 'other', 'cfg']) if (!(await running(s))) return false;
    return true;
  });
});

afterAll(async () => {
  await spcd?.kill9();
  await cleanupInstance(sb.instance);
});

describe('recovery entry by entry', () => {
  it('quarantines an entry whose old instance is gone and a malformed one; spcd starts and supervises the rest', async () => {
    expect(await spcd!.stop()).toBe(0);
    spcd = undefined;
    const gone = (await inspect(n('gone')))!;
    const bad = (await inspect(n('bad')))!;
    // An old instance that existed and was removed (as the planner used to remove a parked one).
    const removed = await docker().createContainer({ Image: 'spcd-demo/service:1', name: n('removed') });
    await removed.remove({ force: true });
    writeFileSync(
      journalFile(n('gone')),
      JSON.stringify({
        operationId: 'op-test',
        kind: 'recreate',
        container: n('gone'),
        fromGeneration: 1,
        toGeneration: 1,
        oldId: removed.id,
        newId: gone.Id,
        stagingName: `${n('gone')}.g1.new`,
        parkedName: `${n('gone')}.g0.old`,
        // Before the start: undone (an entry whose new generation runs from its start on is rolled forward).
        step: 'stopping-old',
        startedAt: new Date().toISOString(),
      }),
    );
    writeFileSync(journalFile(n('bad')), '{"container": "torn');

    spcd = await start();
    const g = await status('gone');
    expect(g.state).toBe('quarantined');
    expect(g.lastError?.code).toBe('RECOVERY_QUARANTINED');
    expect(g.lastError?.message).toMatch(/is gone; kept generation 1/);
    const b = await status('bad');
    expect(b.state).toBe('quarantined');
    expect(b.lastError?.message).toMatch(/malformed journal entry/);
    expect(spcd.logged('"container quarantined')).toBe(true);
    // Their instances are kept, untouched; their entries stay for the operator.
    expect((await inspect(n('gone')))!.Id).toBe(gone.Id);
    expect((await inspect(n('bad')))!.State.StartedAt).toBe(bad.State.StartedAt);
    expect(existsSync(journalFile(n('gone'))) && existsSync(journalFile(n('bad')))).toBe(true);

    // Supervision goes on for the others: a killed container is healed; a quarantined one is left alone.
    const before = (await inspect(n('other')))!.State.StartedAt;
    execFileSync(ENGINE_CLI, ['kill', n('other'), n('gone')]);
    await waitFor(
      'other restarted by spcd',
      async () => {
        const c = await inspect(n('other'));
        return c?.State.Running && c.State.StartedAt !== before;
      },
      { timeoutMs: 20_000 },
    );
    expect(await running('gone')).toBe(false);
    expect(spcd.child.exitCode).toBeNull();
  });

  it('removing the files and SIGHUP clears the quarantine; the containers are supervised again', async () => {
    rmSync(journalFile(n('gone')));
    rmSync(journalFile(n('bad')));
    spcd!.child.kill('SIGHUP');
    await waitFor(
      'both out of quarantine, gone started again',
      async () => (await status('bad')).state === 'running' && (await status('gone')).state === 'running',
      { timeoutMs: 20_000 },
    );
    expect(spcd!.logged('quarantine cleared')).toBe(true);
  });
});

describe('a failing upgrade whose config changed', () => {
  it('rolls back to the old config and does not retry the failed target', async () => {
    const before = (await inspect(n('cfg')))!;
    const oldHash = before.Config.Labels['spcd.config-hash']!;
    const cat = (): string =>
      execFileSync(ENGINE_CLI, ['exec', n('cfg'), 'cat', '/var/lib/kolla/config_files/cfg.conf'], {
        encoding: 'utf8',
      });
    expect(cat()).toBe('level = 1\n');
    // New config and an image that exits at once: the gate fails, the old generation comes back.
    writeFileSync(globals, 'level: 2\n');
    writeSet(sb, 'q.yaml', setYaml('spcd-demo/service:crash'));
    spcd!.child.kill('SIGHUP');
    const waiting = await waitFor(
      'the failed target reported and not retried',
      async () => {
        const plan = (await call(sb.socket, 'GET', '/v1/plan')).json() as { problems: string[] };
        return plan.problems.find((p) => p.includes(n('cfg')) && p.includes('failed and was rolled back'));
      },
      { timeoutMs: 30_000 },
    );
    expect(waiting).toMatch(/generation 2 of this definition failed/);
    const after = (await inspect(n('cfg')))!;
    expect(after.Id).toBe(before.Id);
    expect(after.State.Running).toBe(true);
    // The restored old generation runs its own config: the link and the mounted file.
    const link = readlinkSync(join(configRoot, n('cfg'), 'current'));
    expect(link.startsWith(`${oldHash}-`), link).toBe(true);
    expect(cat()).toBe('level = 1\n');
    const state = JSON.parse(readFileSync(join(sb.stateDir, 'state.json'), 'utf8')) as {
      containers: Record<string, { generations: { generation: number; outcome: string }[] }>;
    };
    expect(state.containers[n('cfg')]!.generations.map((x) => [x.generation, x.outcome])).toEqual([
      [1, 'current'],
      [2, 'rolled-back'],
    ]);
  });
});
