import { describe, expect, it } from 'vitest';
import { runtimeDifferences, type InspectedRuntime } from '../../agent/engine/adopt-diff.js';
import { createBody } from '../../agent/engine/create-options.js';
import { bindsWithoutDevpts, devptsTargets } from '../../agent/engine/dialect.js';
import { specHash } from '../../agent/model/hash.js';
import { containerSpec } from '../support/spec.js';
import {
  cleanupAfterEach,
  container,
  containerProblems,
  loadOne,
  WEB_IDENTITY,
} from '../fixtures/spec/helpers.js';

cleanupAfterEach();

/**
 * `devpts:` (Podman): a new devpts instance at a container path, as
 * kolla-ansible gives nova_libvirt on Podman (`devpts:/dev/pts` among its
 * volumes, which podman-py turns into a devpts mount, not a volume).
 */
const problems = containerProblems;
const IDENTITY = WEB_IDENTITY;

describe('devpts mounts in a definition', () => {
  it('reads container paths, sorted, and creates each as a devpts mount', async () => {
    const spec = await loadOne(container('binds: ["/dev:/dev"]', 'devpts: [/dev/pts, /var/pts]'));
    expect(spec.devpts).toEqual(['/dev/pts', '/var/pts']);
    expect(createBody({ spec, identity: IDENTITY }).HostConfig.Mounts).toEqual([
      { Type: 'devpts', Target: '/dev/pts' },
      { Type: 'devpts', Target: '/var/pts' },
    ]);
  });

  it('adds nothing to the create body or the hash of a definition without one', async () => {
    const spec = await loadOne(container('binds: ["/dev:/dev"]'));
    expect(spec.devpts).toEqual([]);
    expect(createBody({ spec, identity: IDENTITY }).HostConfig.Mounts).toBeUndefined();
    expect(specHash(spec)).toBe(specHash({ ...spec, devpts: [] }));
    expect(specHash({ ...spec, devpts: ['/dev/pts'] })).not.toBe(specHash(spec));
  });

  it("refuses kolla-ansible's volume spelling, a relative path, and a target already mounted", async () => {
    expect(await problems('devpts: ["devpts:/dev/pts"]')).toEqual([
      's.yaml:5: containers.web.devpts[0]: a devpts mount takes no source or options: write only the container path, e.g. /dev/pts',
    ]);
    expect((await problems('devpts: [dev/pts]'))[0]).toMatch(/containers\.web\.devpts\[0\]: .*absolute/);
    expect(await problems('tmpfs: [/dev/pts]', 'devpts: [/dev/pts]')).toEqual([
      's.yaml:6: containers.web.devpts[0]: target /dev/pts is already mounted by containers.web.tmpfs[0]',
    ]);
  });
});

describe("a running container's devpts mounts, as Podman reports them", () => {
  const MOUNTS = [
    { Type: 'bind', Source: '/dev', Destination: '/dev' },
    // through libpod (podman-py, as kolla-ansible creates it)
    { Type: 'bind', Source: '', Destination: '/dev/pts' },
    // a named volume called devpts is a volume
    { Type: 'volume', Source: '/var/lib/containers/storage/volumes/devpts/_data', Destination: '/x' },
  ];

  it('reads them from Mounts, from either API, and not a volume named devpts', () => {
    expect(devptsTargets(MOUNTS)).toEqual(['/dev/pts']);
    // through the Docker-compatible API (the source is written "devpts")
    expect(devptsTargets([{ Type: 'bind', Source: 'devpts', Destination: '/dev/pts' }])).toEqual([
      '/dev/pts',
    ]);
    expect(devptsTargets([{ Type: 'devpts', Destination: '/d' }])).toEqual(['/d']);
    expect(devptsTargets(undefined)).toEqual([]);
  });

  it('leaves them out of the binds, and keeps a volume named devpts', () => {
    const binds = ['/dev:/dev:rw,rprivate,rbind', ':/dev/pts:rw', 'devpts:/x:rw'];
    expect(bindsWithoutDevpts(binds, ['/dev/pts'])).toEqual(['/dev:/dev:rw,rprivate,rbind', 'devpts:/x:rw']);
  });

  it('finds no difference from a definition with the same devpts, and names a missing one', () => {
    const with_ = containerSpec('web', {
      binds: [{ source: '/dev', target: '/dev', readOnly: false }],
      devpts: ['/dev/pts'],
    });
    const running: InspectedRuntime = {
      Config: { Image: with_.image, Env: [], Cmd: null, Entrypoint: null, User: '' },
      HostConfig: {
        Binds: ['/dev:/dev:rw,rprivate,rbind', ':/dev/pts:rw'],
        NetworkMode: 'none',
        RestartPolicy: { Name: '' },
      },
      Mounts: MOUNTS.slice(0, 2),
    };
    const image = { Env: [], Cmd: null, Entrypoint: null, User: '' };
    const diff = (spec: typeof with_): string[] =>
      runtimeDifferences(spec, createBody({ spec, identity: IDENTITY }), running, image);
    expect(diff(with_)).toEqual([]);
    expect(diff({ ...with_, devpts: [] })).toEqual(['devpts: definition [], running ["/dev/pts"]']);
  });
});
