/**
 * The bundled demo set (container-sets/demo) on Podman, as
 * `SPCD_ENGINE=podman npm run demo` runs it. Without the Podman host file,
 * spcd refuses the hypervisor stand-in before asking Podman (its `init: true`
 * with `pid: host`), names the field, tries it no more, and runs what does
 * not need it. Once the operator puts container-sets/hosts/podman.yaml in the
 * overrides file and reloads, the whole set runs with its checks passing,
 * and a stand-in VM started in the hypervisor keeps its PID and start time
 * across an upgrade of it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../support/api-http.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { BundledDemo } from '../support/demo-set.js';
import { cleanupInstance, crash, inspect } from '../support/docker.js';
import { freePort } from '../support/ports.js';
import { endVms, startVm, type StandInVm } from '../support/stand-in-vms.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('pmdemo');
const overridesFile = join(sb.root, 'overrides.yaml');
let demo: BundledDemo;
let spcd: SpcdProcess;
const vms: StandInVm[] = [];

interface View {
  state: string;
  health: string;
  generation: number;
  operation: string | null;
  lastError: { code: string; message: string } | null;
}

const view = async (name: string): Promise<View> =>
  (await call(sb.socket, 'GET', `/v1/containers/${name}`)).json() as View;

/** Field 22 of /proc/PID/stat: the start time in clock ticks since boot. */
function startTime(pid: number): string | undefined {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[22 - 3];
}

beforeAll(async () => {
  demo = BundledDemo.create(sb, await freePort());
  writeSet(sb, 'demo.yaml', demo.read('container-sets/demo/demo.yaml'));
  // The operator's overrides file, empty until the Podman host file goes in.
  writeFileSync(overridesFile, 'containers: {}\n');
  spcd = SpcdProcess.start(sb, ['--overrides', overridesFile, '--gate-deadline', '20s']);
  await spcd.ready(60_000);
});

afterAll(async () => {
  await endVms(vms);
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('the bundled demo set on Podman', () => {
  it('refuses the hypervisor stand-in once, naming init and pid, and runs what does not need it', async () => {
    const libvirt = demo.name('libvirt');
    await waitFor('the hypervisor given up', async () => (await view(libvirt)).state === 'failed');
    const { lastError } = await view(libvirt);
    expect(lastError?.code).toBe('ENGINE_UNSUPPORTED');
    expect(lastError?.message).toContain(`container ${libvirt} (`);
    expect(lastError?.message).toContain('demo.yaml');
    expect(lastError?.message).toContain('init: true with pid: host');
    expect(lastError?.message).toContain(`containers.${libvirt}.init: false`);
    // Nothing was created, and the refusal was not retried with backoff.
    expect(await inspect(libvirt)).toBeUndefined();
    await waitFor('the agent running', async () => (await inspect(demo.name('ovs_agent')))?.State.Running);
    expect(await inspect(demo.name('compute'))).toBeUndefined();
    expect(spcd.output.filter((l) => l.includes('"code":"ENGINE_UNSUPPORTED"'))).toHaveLength(1);
  });

  it('runs the whole set once the Podman host file is in the overrides and spcd reloads', async () => {
    writeFileSync(overridesFile, demo.read('container-sets/hosts/podman.yaml'));
    expect((await call(sb.socket, 'POST', '/v1/reload', {})).status).toBe(202);
    for (const m of ['libvirt', 'compute', 'ovs_agent'] as const)
      await waitFor(
        `${m} running with its checks passing`,
        async () => {
          const v = await view(demo.name(m));
          return v.state === 'running' && v.health === 'healthy';
        },
        { timeoutMs: 60_000 },
      );
    const hv = await inspect(demo.name('libvirt'));
    expect(hv?.HostConfig.PidMode).toBe('host');
    expect(hv?.HostConfig.Privileged).toBe(true);
    expect((await view(demo.name('libvirt'))).lastError).toBeNull();
  });

  it("keeps a stand-in VM's PID and start time across an upgrade of the hypervisor", async () => {
    const libvirt = demo.name('libvirt');
    const vm = startVm(libvirt, `pm${process.pid}`);
    vms.push(vm);
    const started = startTime(vm.pid);
    const g = (await view(libvirt)).generation;
    const up = await call(sb.socket, 'POST', `/v1/containers/${libvirt}/upgrade`, {
      image: 'spcd-demo/service:2',
    });
    expect(up.status).toBe(202);
    await waitFor(
      'the upgrade committed',
      async () => {
        const v = await view(libvirt);
        return v.generation === g + 1 && v.operation === null && v.state === 'running';
      },
      { timeoutMs: 60_000 },
    );
    expect((await inspect(libvirt))?.Config.Image).toBe('localhost/spcd-demo/service:2');
    expect(startTime(vm.pid)).toBe(started);
  });

  it('refuses a changed definition Podman cannot run, and keeps the running hypervisor supervised', async () => {
    const libvirt = demo.name('libvirt');
    const before = await inspect(libvirt);
    const g = (await view(libvirt)).generation;
    // The Podman host file taken out again (the set file's init: true is back), the image it runs kept.
    writeFileSync(overridesFile, `containers:\n  ${libvirt}:\n    image: spcd-demo/service:2\n`);
    expect((await call(sb.socket, 'POST', '/v1/reload', {})).status).toBe(202);
    await waitFor(
      'the replacement refused',
      async () => (await view(libvirt)).lastError?.code === 'ENGINE_UNSUPPORTED',
    );
    const v = await view(libvirt);
    expect([v.state, v.generation]).toEqual(['running', g]);
    expect((await inspect(libvirt))?.State.StartedAt).toBe(before?.State.StartedAt);
    const plan = (await call(sb.socket, 'GET', '/v1/plan')).json() as { problems: string[] };
    expect(plan.problems.find((w) => w.startsWith(`${libvirt}: `))).toMatch(
      /failed and was rolled back; waiting for a new definition/,
    );
    // Still supervised: killed, the same container is started again; the refused target is not tried again.
    await crash(libvirt);
    await waitFor('the hypervisor started again', async () => {
      const now = await inspect(libvirt);
      return now?.State.Running && now.State.StartedAt !== before?.State.StartedAt && now.Id === before?.Id;
    });
    expect(spcd.output.filter((l) => l.includes('"code":"ENGINE_UNSUPPORTED"'))).toHaveLength(2);
  });
});
