import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, docker, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * Named volumes on the real engine, through the real spcd: a missing volume
 * is created with spcd's labels before the container, and Docker fills it
 * from the image (an image made here from the demo image, with
 * /var/log/kolla as Kolla's images have it: root:42, mode 2775, one file); a
 * volume that existed before is used as it is; removing the container from
 * the set leaves both volumes. The test removes the volumes and the image it
 * made (spcd never removes a volume).
 */
const sb: Sandbox = sandbox('vols');
const n = (s: string): string => `${sb.instance}-${s}`;
/** spcd creates this one. */
const FRESH = n('kolla-logs');
/** The demo image with a Kolla-like /var/log/kolla. */
const IMAGE = `spcd-test/${sb.instance}:1`;
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
    image: ${IMAGE}
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
    binds:
      - ${FRESH}:/var/log/kolla/
      - { source: ${BEFORE}, target: /var/lib/kept, read_only: true }
`
    : ''
}  ${n('other')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
`;

/** Commits the demo image with /var/log/kolla owned root:42, mode 2775, holding .keep. */
async function kollaLikeImage(): Promise<void> {
  const c = await docker().createContainer({
    Image: 'spcd-demo/service:1',
    Cmd: [
      'sh',
      '-c',
      'mkdir -p /var/log/kolla && echo kolla > /var/log/kolla/.keep && chown -R 0:42 /var/log/kolla && chmod 2775 /var/log/kolla',
    ],
    Labels: { 'spcd-test.instance': sb.instance },
    HostConfig: { NetworkMode: 'none' },
  });
  await c.start();
  expect((await c.wait()) as { StatusCode: number }).toMatchObject({ StatusCode: 0 });
  const [repo, tag] = IMAGE.split(':');
  await c.commit({ repo, tag });
  await c.remove();
}

beforeAll(async () => {
  await kollaLikeImage();
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
  await docker()
    .getImage(IMAGE)
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
    // The image's /var/log/kolla, copied into the new volume with its owner and mode.
    expect(await readFile(join(v!.Mountpoint, '.keep'), 'utf8')).toBe('kolla\n');
    const folder = await stat(v!.Mountpoint);
    expect([(folder.mode & 0o7777).toString(8), folder.uid, folder.gid]).toEqual(['2775', 0, 42]);
    expect(spcd!.logged('"volume created"')).toBe(true);
    const mounts = (await docker().getContainer(n('user')).inspect()).Mounts;
    const byTarget = [...mounts].sort((a, b) => a.Destination.localeCompare(b.Destination));
    expect(byTarget.map((m) => [m.Type, m.Name, m.Destination, m.RW])).toEqual([
      ['volume', BEFORE, '/var/lib/kept', false],
      ['volume', FRESH, '/var/log/kolla', true],
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
    expect(await readFile(join((await volume(FRESH))!.Mountpoint, '.keep'), 'utf8')).toBe('kolla\n');
    expect((await volume(BEFORE))?.Labels).toEqual(BEFORE_LABELS);
  });
});
