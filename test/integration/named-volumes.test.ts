import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, docker, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * Named volumes on the real engine, through the real spcd: a missing volume
 * is created with spcd's labels before the container, and Docker fills it
 * from the image at the first mount (the demo image's /etc/spcd-demo); a
 * volume that existed before is used as it is; removing the container from
 * the set leaves both volumes. The test removes the volumes it made (spcd
 * never does).
 */
const sb: Sandbox = sandbox('vols');
const n = (s: string): string => `${sb.instance}-${s}`;
/** spcd creates this one. */
const FRESH = n('demo-etc');
/** The test creates this one first, as kolla-ansible would. */
const BEFORE = n('kept');
const BEFORE_LABELS = { 'made-by': 'named-volumes-test' };
let spcd: SpcdProcess | undefined;

interface VolumeInspect {
  Name: string;
  Driver: string;
  Mountpoint: string;
  Labels: Record<string, string> | null;
}

async function volume(name: string): Promise<VolumeInspect | undefined> {
  try {
    return (await docker().getVolume(name).inspect()) as VolumeInspect;
  } catch {
    return undefined;
  }
}

const withVolumes = (withUser: boolean): string => `set: app
containers:
${
  withUser
    ? `  ${n('user')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
    binds:
      - ${FRESH}:/etc/spcd-demo/
      - { source: ${BEFORE}, target: /var/lib/kept, read_only: true }
`
    : ''
}  ${n('other')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
`;

beforeAll(async () => {
  await docker().createVolume({ Name: BEFORE, Labels: BEFORE_LABELS });
  writeSet(sb, 'app.yaml', withVolumes(true));
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
  await waitFor(
    'the container with volumes running',
    async () => (await inspect(n('user')))?.State.Running === true,
    { timeoutMs: 30_000 },
  );
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  for (const name of [FRESH, BEFORE])
    await docker()
      .getVolume(name)
      .remove()
      .catch(() => undefined);
});

describe('named volumes', () => {
  it('creates a missing volume with spcd labels, and Docker fills it from the image', async () => {
    const v = await volume(FRESH);
    expect(v?.Labels).toEqual({
      'spcd.volume.created-by': 'spcd',
      'spcd.instance': sb.instance,
      'spcd.volume.container': n('user'),
    });
    expect(v?.Driver).toBe('local');
    // The image's /etc/spcd-demo/version, copied into the new volume at its first mount.
    expect(await readFile(join(v!.Mountpoint, 'version'), 'utf8')).toBe('1\n');
    expect(spcd!.logged('"volume created"')).toBe(true);
    const mounts = (await docker().getContainer(n('user')).inspect()).Mounts;
    const byTarget = [...mounts].sort((a, b) => a.Destination.localeCompare(b.Destination));
    expect(byTarget.map((m) => [m.Type, m.Name, m.Destination, m.RW])).toEqual([
      ['volume', FRESH, '/etc/spcd-demo', true],
      ['volume', BEFORE, '/var/lib/kept', false],
    ]);
  });

  it('uses a volume that existed before as it is: not relabelled', async () => {
    expect((await volume(BEFORE))?.Labels).toEqual(BEFORE_LABELS);
  });

  it('leaves both volumes when the container is removed from the set', async () => {
    writeSet(sb, 'app.yaml', withVolumes(false));
    spcd!.child.kill('SIGHUP');
    await waitFor('the container removed', async () => (await inspect(n('user'))) === undefined, {
      timeoutMs: 30_000,
    });
    expect((await volume(FRESH))?.Labels?.['spcd.volume.created-by']).toBe('spcd');
    expect(await readFile(join((await volume(FRESH))!.Mountpoint, 'version'), 'utf8')).toBe('1\n');
    expect((await volume(BEFORE))?.Labels).toEqual(BEFORE_LABELS);
  });
});
