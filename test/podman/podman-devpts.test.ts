/**
 * A devpts mount on Podman (`devpts:` in a set), as kolla-ansible gives
 * nova_libvirt on a Podman host: /dev bound from the host and a new devpts
 * instance at /dev/pts. spcd creates it through Podman's Docker-compatible
 * API and leaves the container alone on its next passes and after a restart
 * of spcd. (Reading one back from a container spcd did not make is the
 * adoption test's: test/integration/adopt-kolla-host.test.ts on Podman.)
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devptsTargets } from '../../agent/engine/dialect.js';
import type { PlanView } from '../../agent/api/types.js';
import { runSpcctl } from '../support/cli-run.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, docker } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('podman-devpts');
const NAME = `${sb.instance}-pts`;
let spcd: SpcdProcess | undefined;

interface Running {
  readonly id: string;
  readonly pid: number;
  readonly mounts: { Type?: string; Source?: string; Destination?: string }[];
}

async function running(): Promise<Running | undefined> {
  const i = (await docker()
    .getContainer(NAME)
    .inspect()
    .catch(() => undefined)) as
    { Id: string; State: { Running: boolean; Pid: number }; Mounts: Running['mounts'] } | undefined;
  return i?.State.Running ? { id: i.Id, pid: i.State.Pid, mounts: i.Mounts } : undefined;
}

/**
 * The device number (major:minor) and type of the filesystem a process sees
 * at `path`: the last mount there in its mountinfo, the one on top (the /dev
 * bind brings the host's /dev/pts in beneath).
 */
function mountAt(pid: number | 'self', path: string): { dev: string; type: string } | undefined {
  let top: { dev: string; type: string } | undefined;
  for (const line of readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n')) {
    const [left, right] = line.split(' - ');
    const f = (left ?? '').split(' ');
    if (f[4] === path) top = { dev: f[2] ?? '', type: (right ?? '').split(' ')[0] ?? '' };
  }
  return top;
}

const plan = async (): Promise<PlanView> =>
  JSON.parse((await runSpcctl(['--socket', sb.socket, 'plan', '-o', 'json'], {})).out) as PlanView;

beforeAll(async () => {
  writeSet(
    sb,
    'pts.yaml',
    `set: pts\ncontainers:\n${demoContainerYaml(NAME, ['binds: ["/dev:/dev"]', 'devpts: [/dev/pts]', 'stop_grace_period: 1s'])}`,
  );
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
}, 120_000);

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('a devpts mount on Podman', () => {
  let first: Running;

  it('is created as a new devpts instance over the bound /dev', async () => {
    first = await waitFor(`${NAME} running`, running, { timeoutMs: 60_000 });
    expect(devptsTargets(first.mounts)).toEqual(['/dev/pts']);
    const inside = mountAt(first.pid, '/dev/pts');
    expect(inside?.type).toBe('devpts');
    // A new instance: not the host's /dev/pts, which the /dev bind brings in.
    expect(inside?.dev).not.toBe(mountAt('self', '/dev/pts')?.dev);
  });

  it('is kept: nothing to do on the next passes, nor after a SIGKILL of spcd', async () => {
    await waitFor('an empty plan', async () => (await plan()).items.length === 0, { timeoutMs: 30_000 });
    await spcd?.kill9();
    spcd = SpcdProcess.start(sb);
    await spcd.ready();
    const view = await waitFor(
      'the new spcd lists it',
      async () => {
        const p = await plan();
        return p.problems.length === 0 && p.items.length === 0 && p;
      },
      { timeoutMs: 30_000 },
    );
    expect(view.items).toEqual([]);
    expect((await running())?.id).toBe(first.id);
  });
});
