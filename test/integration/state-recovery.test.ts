/**
 * What a restarted spcd finds of a predecessor, through the real daemon
 * process and a real dockerd: a bootstrap task container orphaned by a
 * SIGKILL is killed and removed before its task runs again (never two side
 * by side, none left), and a corrupt state.json does not stop spcd: it is
 * kept aside, the running containers are left alone, and generation numbers
 * go on above every number a container of the instance carries.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { demoContainerYaml, REPO, sandbox, SpcdProcess, writeSet } from '../support/daemon.js';
import { cleanupInstance, docker, inspect, recordContainerEvents } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);
const started: SpcdProcess[] = [];
const instances: string[] = [];
const spcd = (...args: Parameters<typeof SpcdProcess.start>): SpcdProcess => {
  const p = SpcdProcess.start(...args);
  started.push(p);
  return p;
};

afterAll(async () => {
  for (const p of started) await p.kill9();
  for (const i of instances) await cleanupInstance(i);
});

const taskContainers = async (instance: string) =>
  docker().listContainers({ all: true, filters: { label: [`spcd.instance=${instance}`, 'spcd.task'] } });

describe('a bootstrap task orphaned by a dead spcd', () => {
  const sb = sandbox('taskorphan');
  instances.push(sb.instance);
  const db = `${sb.instance}-db`;

  it('is killed and removed before the task runs again: one at a time, none left', async () => {
    writeSet(
      sb,
      'db.yaml',
      `set: db\ncontainers:\n${demoContainerYaml(db, ['stop_grace_period: 1s'])}    bootstrap:\n      - { name: db_sync, command: [sleep, '6'], timeout: 60s }\n`,
    );
    const events = await recordContainerEvents({ label: [`spcd.instance=${sb.instance}`, 'spcd.task'] });
    try {
      const first = spcd(sb);
      const orphan = await waitFor('the first db_sync running', async () =>
        (await taskContainers(sb.instance)).find((c) => c.State === 'running'),
      );
      await first.kill9();
      expect((await inspect(orphan.Id))?.State.Running).toBe(true); // left running by the dead spcd

      const second = spcd(sb);
      await second.ready(60_000);
      await waitFor('db running', async () => (await inspect(db))?.State.Running, { timeoutMs: 60_000 });
      expect(await taskContainers(sb.instance)).toEqual([]);
      await waitFor(
        'every task container destroyed',
        () => {
          const ids = new Set(events.seen.filter((e) => e.action === 'start').map((e) => e.id));
          return (
            ids.size >= 2 &&
            [...ids].every((id) => events.seen.some((e) => e.id === id && e.action === 'destroy'))
          );
        },
        { timeoutMs: 20_000 },
      );
      // Each task container's life, start to die, from the engine's own clock: no two overlap.
      const lives = [...new Set(events.seen.filter((e) => e.action === 'start').map((e) => e.id))]
        .map((id) => ({
          name: events.seen.find((e) => e.id === id)!.name,
          start: events.seen.find((e) => e.id === id && e.action === 'start')!.at,
          end: events.seen.find((e) => e.id === id && e.action === 'die')!.at,
        }))
        .sort((a, b) => a.start - b.start);
      expect(lives.map((l) => l.name)).toEqual([`${db}.g1.task-db_sync`, `${db}.g2.task-db_sync`]);
      for (let i = 1; i < lives.length; i++)
        expect(lives[i]!.start).toBeGreaterThanOrEqual(lives[i - 1]!.end);
      expect((await inspect(db))?.Config.Labels['spcd.generation']).toBe('2');
      expect(second.logged('removing a bootstrap task container left by an earlier spcd')).toBe(true);
    } finally {
      events.close();
    }
  });
});

describe('a corrupt state.json between two runs', () => {
  const sb = sandbox('corrupt');
  instances.push(sb.instance);
  const svc = `${sb.instance}-svc`;
  const statePath = join(sb.stateDir, 'state.json');

  it('spcd comes up, sets the file aside, leaves containers alone and never reuses a generation', async () => {
    writeSet(sb, 'svc.yaml', `set: svc\ncontainers:\n${demoContainerYaml(svc, ['stop_grace_period: 1s'])}`);
    const first = spcd(sb);
    await first.ready();
    const before = await waitFor('svc running', async () => {
      const c = await inspect(svc);
      return c?.State.Running ? c : undefined;
    });
    expect(before.Config.Labels['spcd.generation']).toBe('1');
    expect(await first.stop()).toBe(0);

    // What a predecessor may leave: a task container of generation 7 (it died during an upgrade's db sync).
    await docker().createContainer({
      name: `${svc}.g7.task-db_sync`,
      Image: 'spcd-demo/service:1',
      Cmd: ['true'],
      Labels: { ...before.Config.Labels, 'spcd.generation': '7', 'spcd.task': 'db_sync' },
      HostConfig: { NetworkMode: 'none' },
    });
    const torn = readFileSync(statePath, 'utf8').slice(0, 40);
    writeFileSync(statePath, torn);

    const second = spcd(sb);
    await second.ready();
    const status = JSON.parse(
      (await run('curl', ['-s', '--unix-socket', sb.socket, 'http://spcd/v1/status'])).stdout,
    ) as { stateRecovery?: { movedTo: string; reason: string; rebuilt: string[] } };
    expect(status.stateRecovery?.reason).toContain('not valid JSON');
    expect(status.stateRecovery?.rebuilt).toEqual([svc]);
    expect(readFileSync(status.stateRecovery!.movedTo, 'utf8')).toBe(torn);
    expect(second.logged('state.json unusable')).toBe(true);
    expect(await taskContainers(sb.instance)).toEqual([]);

    // Untouched: the same container, never restarted, and nothing planned for it.
    const after = await inspect(svc);
    expect(after?.Id).toBe(before.Id);
    expect(after?.State.StartedAt).toBe(before.State.StartedAt);
    const plan = JSON.parse(
      (await run('curl', ['-s', '--unix-socket', sb.socket, 'http://spcd/v1/plan'])).stdout,
    ) as { items: unknown[] };
    expect(plan.items).toEqual([]);

    const up = await run(
      join(REPO, 'bin', 'spcctl.js'),
      ['upgrade', svc, '--image', 'spcd-demo/service:2', '--wait', '--timeout', '90'],
      { env: { ...process.env, SPCD_SOCKET: sb.socket } },
    );
    expect(up.stdout).toContain('succeeded');
    expect((await inspect(svc))?.Config.Labels['spcd.generation']).toBe('8');
    const saved = JSON.parse(readFileSync(statePath, 'utf8')) as {
      containers: Record<string, { nextGeneration: number; lastKnownGood: number }>;
    };
    expect(saved.containers[svc]).toMatchObject({ nextGeneration: 9, lastKnownGood: 8 });
    expect(existsSync(status.stateRecovery!.movedTo)).toBe(true);
  });
});
