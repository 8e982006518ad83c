import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inOrder } from '../support/in-order.js';
import { DockerEngine } from '../../agent/engine/docker.js';
import { silentLogger } from '../../agent/log.js';
import { specHash } from '../../agent/model/hash.js';
import { loadDesired } from '../../agent/spec/load.js';
import {
  capsOverride,
  demoContainerYaml,
  REPO,
  sandbox,
  SpcdProcess,
  writeSet,
  type Sandbox,
} from '../support/daemon.js';
import { cleanupInstance, containersOf, docker, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('foundation');
const n = (s: string): string => `${sb.instance}-${s}`;
const PORT = 20000 + Math.floor(Math.random() * 20000);

function setYaml(opts: { appImage?: string; extraEnv?: string } = {}): string {
  return `
set: app
description: foundation test set
containers:
  ${n('hv')}:
    image: spcd-demo/service:1
    command: [demo-service, libvirt]
    role: hypervisor
    privileged: true
    pid: host
    network: host
    ipc: host
    cgroupns: host
    binds:
      - /sys/fs/cgroup:/sys/fs/cgroup
      - ${sb.root}/run-libvirt:/run/libvirt:rprivate
      - ${sb.root}/lib-libvirt:/var/lib/libvirt
    tmpfs: [/sys/fs/cgroup/unified]
    cap_add: [NET_ADMIN]
    init: true
    memory: 64m
    stop_grace_period: 2s
  ${n('api')}:
    image: ${opts.appImage ?? 'spcd-demo/service:1'}
    command: [demo-service, compute, '${PORT}']
    network: host
    depends_on: [${n('hv')}]
    environment: { ROLE: api${opts.extraEnv ? `, EXTRA: ${opts.extraEnv}` : ''} }
    stop_grace_period: 2s
  ${n('agent')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    cap_drop: [NET_RAW]
    stop_grace_period: 1s
`;
}

let spcd: SpcdProcess;
let overrides: string;

async function startedAt(name: string): Promise<string> {
  const c = await inspect(name);
  if (!c) throw new Error(`${name} not found`);
  return c.State.StartedAt;
}

async function allRunning(): Promise<boolean> {
  for (const s of ['hv', 'api', 'agent']) {
    const c = await inspect(n(s));
    if (!c?.State.Running) return false;
  }
  return true;
}

beforeAll(async () => {
  writeSet(sb, 'app.yaml', setYaml());
  overrides = capsOverride(sb, [n('hv')]);
  spcd = SpcdProcess.start(sb, ['--overrides', overrides]);
  await spcd.ready();
  await waitFor('all three containers running', allRunning, { timeoutMs: 30_000 });
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  await docker()
    .getContainer(n('foreign'))
    .remove({ force: true })
    .catch(() => undefined);
});

describe('spcd on a real engine', () => {
  inOrder();
  it('brings the set up in depends_on order', async () => {
    const hv = Date.parse(await startedAt(n('hv')));
    const api = Date.parse(await startedAt(n('api')));
    expect(api).toBeGreaterThanOrEqual(hv);
  });

  it('creates exactly the requested HostConfig, with identity labels', async () => {
    const hv = await inspect(n('hv'));
    const hc = hv!.HostConfig as Record<string, unknown>;
    expect(hc.PidMode).toBe('host');
    expect(hc.NetworkMode).toBe('host');
    expect(hc.IpcMode).toBe('host');
    expect(hc.CgroupnsMode).toBe('host');
    expect(hc.Privileged).toBe(false); // the per-host override replaced it
    expect(hc.CapAdd).toEqual(['ALL']);
    expect(hc.CapDrop).toEqual(['SYS_RESOURCE']);
    expect(hc.Init).toBe(true);
    expect(hc.Memory).toBe(64 * 1024 * 1024);
    expect(hc.RestartPolicy).toEqual({ Name: 'no', MaximumRetryCount: 0 });
    expect(hc.Binds).toEqual([
      `${sb.root}/run-libvirt:/run/libvirt:rw,rprivate`,
      '/sys/fs/cgroup:/sys/fs/cgroup:rw',
      `${sb.root}/lib-libvirt:/var/lib/libvirt:rw`,
    ]);
    expect(hc.Tmpfs).toEqual({ '/sys/fs/cgroup/unified': '' });
    const labels = hv!.Config.Labels;
    expect(labels['spcd.instance']).toBe(sb.instance);
    expect(labels['spcd.set']).toBe('app');
    expect(labels['spcd.container']).toBe(n('hv'));
    expect(labels['spcd.generation']).toBe('1');
    expect(labels['spcd.spec-hash']).toMatch(/^v2-[0-9a-f]{32}$/);
    const agent = await inspect(n('agent'));
    expect(agent!.HostConfig.NetworkMode).toBe('none');
    expect(agent!.HostConfig.CapDrop).toEqual(['NET_RAW']);
  });

  it('creates Privileged and shared propagation as written (create only: this VM cannot start them)', async () => {
    const desired = await loadDesired({
      setsDir: sb.setsDir,
      checkLibraryFile: join(REPO, 'healthchecks/library.yaml'),
    });
    const spec = desired.sets[0]!.containers[0]!;
    const withShared = {
      ...spec,
      binds: [
        ...spec.binds,
        { source: sb.root, target: '/shared', readOnly: true, propagation: 'rshared' as const },
      ],
    };
    const engine = new DockerEngine({ socketPath: '/var/run/docker.sock', log: silentLogger() });
    const id = await engine.create({
      spec: withShared,
      identity: {
        instance: sb.instance,
        set: 'app',
        container: 'probe',
        generation: 1,
        specHash: specHash(spec),
        configHash: 'none',
      },
      name: n('created-only'),
    });
    try {
      const c = await inspect(id);
      expect(c!.HostConfig.Privileged).toBe(true);
      expect(c!.HostConfig.PidMode).toBe('host');
      expect(c!.HostConfig.Binds).toContain(`${sb.root}:/shared:ro,rshared`);
    } finally {
      await engine.remove(id);
    }
  });

  it('restarts a container that was killed', async () => {
    const before = await startedAt(n('agent'));
    execFileSync('/usr/bin/docker', ['kill', n('agent')]);
    await waitFor(
      'agent restarted',
      async () => {
        const c = await inspect(n('agent'));
        return c?.State.Running && c.State.StartedAt !== before;
      },
      { timeoutMs: 10_000 },
    );
  });

  it('adopts running containers after a restart of spcd without restarting them', async () => {
    const before = await Promise.all(['hv', 'api', 'agent'].map((s) => startedAt(n(s))));
    expect(await spcd.stop()).toBe(0);
    expect(await allRunning()).toBe(true); // stopping spcd stops no container
    spcd = SpcdProcess.start(sb, ['--overrides', overrides]);
    await spcd.ready();
    const after = await Promise.all(['hv', 'api', 'agent'].map((s) => startedAt(n(s))));
    expect(after).toEqual(before);
    expect((await containersOf(sb.instance)).length).toBe(3);
  });

  it('recreates exactly the container whose definition changed, and not for reordered keys or equal units', async () => {
    const before = await Promise.all(['hv', 'api', 'agent'].map((s) => startedAt(n(s))));
    // Equivalent definition: memory in bytes instead of "64m", keys reordered. Nothing may change.
    writeSet(
      sb,
      'app.yaml',
      setYaml()
        .replace('memory: 64m', 'memory: 67108864')
        .replace('    init: true\n', '')
        .replace('    role: hypervisor\n', '    init: true\n    role: hypervisor\n'),
    );
    spcd.child.kill('SIGHUP');
    await waitFor('reload done', () =>
      spcd.output.find((l) => l.includes('"kind":"reload"') && l.includes('operation succeeded')),
    );
    const reloadLine = spcd.output.find(
      (l) => l.includes('"kind":"reload"') && l.includes('operation succeeded'),
    )!;
    expect(JSON.parse(reloadLine).result.changes).toEqual([]);
    // and a real change to one container
    writeSet(sb, 'app.yaml', setYaml({ extraEnv: 'yes' }));
    spcd.child.kill('SIGHUP');
    await waitFor(
      'api recreated at generation 2',
      async () =>
        (await inspect(n('api')))?.Config.Labels['spcd.generation'] === '2' &&
        (await inspect(n('api')))?.State.Running,
      { timeoutMs: 20_000 },
    );
    // The old generation goes once the new one passed its gate.
    await waitFor('old api generation removed', async () => (await containersOf(sb.instance)).length === 3);
    expect((await inspect(n('api')))!.Config.Labels['spcd.generation']).toBe('2');
    expect(await startedAt(n('hv'))).toBe(before[0]);
    expect(await startedAt(n('agent'))).toBe(before[2]);
  });

  it('never touches a container without its labels, even under a defined name', async () => {
    const foreign = await docker().createContainer({
      name: n('foreign'),
      Image: 'spcd-demo/service:1',
      Cmd: ['demo-service', 'sleep'],
      Labels: { 'spcd.set': 'app', 'spcd.container': n('foreign') }, // partial labels: not ours
      HostConfig: { NetworkMode: 'none' },
    });
    await foreign.start();
    const before = (await inspect(n('foreign')))!.State.StartedAt;
    // A definition claiming the same name: spcd must refuse to take it over.
    writeFileSync(
      join(sb.setsDir, 'other.yaml'),
      `set: other\ncontainers:\n${demoContainerYaml(n('foreign'))}`,
    );
    spcd.child.kill('SIGHUP');
    // spcd creates nothing under the taken name: its plan offers the container for adoption, on the operator's word.
    const plan = (): { items: { container: string; action: string }[] } =>
      JSON.parse(
        execFileSync('curl', ['-sf', '--unix-socket', sb.socket, 'http://spcd/v1/plan'], {
          encoding: 'utf8',
        }),
      );
    await waitFor(
      'spcd to leave the taken name to the operator (adopt in its plan)',
      () => plan().items.some((i) => i.container === n('foreign') && i.action === 'adopt'),
      { timeoutMs: 15_000 },
    );
    const after = await inspect(n('foreign'));
    expect(after!.State.Running).toBe(true);
    expect(after!.State.StartedAt).toBe(before);
    expect(after!.Config.Labels['spcd.generation']).toBeUndefined();
  });
});
