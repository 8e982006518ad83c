import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkDockerEngine, checkLiveRestore } from '../../agent/preflight/checks.js';
import { formatPreflight, runPreflight } from '../../agent/preflight/run.js';
import type { DockerInfoLite, PreflightDeps } from '../../agent/preflight/types.js';

const GiB = 1024 ** 3;
const engine: DockerInfoLite = {
  kind: 'docker',
  version: '20.10.24',
  liveRestore: true,
  cgroupVersion: '1',
  cgroupDriver: 'cgroupfs',
};

interface Tree {
  cpuFlags?: string;
  modules?: string[];
  sysModules?: string[];
  kvm?: boolean;
  procs?: { pid: number; comm: string; cgroup: string }[];
  mounts?: string;
  timesync?: boolean;
}

function fakeHost(t: Tree): Pick<PreflightDeps, 'procRoot' | 'sysRoot' | 'devRoot' | 'runRoot'> {
  const root = mkdtempSync(join(tmpdir(), 'spcd-preflight-'));
  const proc = join(root, 'proc');
  const sys = join(root, 'sys');
  const dev = join(root, 'dev');
  const run = join(root, 'run');
  for (const d of [proc, join(proc, 'self'), join(sys, 'module'), dev, run])
    mkdirSync(d, { recursive: true });
  if (t.cpuFlags !== undefined)
    writeFileSync(
      join(proc, 'cpuinfo'),
      `processor\t: 0\nflags\t\t: fpu ${t.cpuFlags} sse2\n\nprocessor\t: 1\n`,
    );
  if (t.modules)
    writeFileSync(join(proc, 'modules'), t.modules.map((m) => `${m} 16384 0 - Live 0x0`).join('\n'));
  for (const m of t.sysModules ?? []) mkdirSync(join(sys, 'module', m));
  if (t.kvm) writeFileSync(join(dev, 'kvm'), '');
  for (const p of t.procs ?? []) {
    mkdirSync(join(proc, String(p.pid)));
    writeFileSync(join(proc, String(p.pid), 'comm'), `${p.comm}\n`);
    writeFileSync(join(proc, String(p.pid), 'cgroup'), p.cgroup);
  }
  writeFileSync(
    join(proc, 'self', 'mounts'),
    t.mounts ?? 'sysfs /sys sysfs rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n',
  );
  if (t.timesync) {
    mkdirSync(join(run, 'systemd', 'timesync'), { recursive: true });
    writeFileSync(join(run, 'systemd', 'timesync', 'synchronized'), '');
  }
  return { procRoot: proc, sysRoot: sys, devRoot: dev, runRoot: run };
}

const base = {
  stateDir: '/var/lib/spcd',
  now: () => Date.UTC(2026, 0, 2, 3, 4, 5),
  hostInfo: async () => ({ hostname: 'compute-1', kernel: '6.1.0', distro: 'Debian 12' }),
  freeBytes: async () => 100 * GiB,
};

describe('preflight on a fake /proc and /sys', () => {
  it('a good compute host passes every check', async () => {
    const r = await runPreflight({
      ...base,
      ...fakeHost({
        cpuFlags: 'vmx',
        kvm: true,
        modules: ['br_netfilter', 'openvswitch'],
        sysModules: ['ebtables'], // built in: only in /sys/module
        procs: [
          { pid: 900, comm: 'libvirtd', cgroup: '12:pids:/docker/0123abcd\n' },
          { pid: 901, comm: 'chronyd', cgroup: '0::/system.slice/chrony.service\n' },
        ],
      }),
      engine: { info: async () => engine },
    });
    expect(r.checks.filter((c) => !c.ok)).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.checks.find((c) => c.name === 'host-libvirtd')?.detail).toMatch(/1 inside containers/);
    expect(r.checks.find((c) => c.name === 'cgroups')?.detail).toMatch(/cgroup v2/);
    expect(formatPreflight(r)).toMatch(/preflight passed\n$/);
  });

  it('an unreachable engine, no cgroup fs, a host libvirtd and a full state disk block the start', async () => {
    const r = await runPreflight({
      ...base,
      ...fakeHost({
        cpuFlags: 'svm',
        kvm: true,
        modules: ['br_netfilter', 'ebtables', 'openvswitch'],
        procs: [{ pid: 77, comm: 'libvirtd', cgroup: '0::/system.slice/libvirtd.service\n' }],
        mounts: 'proc /proc proc rw 0 0\n',
        timesync: true,
      }),
      engine: { info: () => Promise.reject(new Error('connect ENOENT /var/run/docker.sock')) },
      freeBytes: async (p) => (p === '/var/lib/spcd' ? 10 * 1024 * 1024 : 100 * GiB),
    });
    expect(r.ok).toBe(false);
    expect([...r.blocking].sort()).toEqual(['cgroups', 'disk-state', 'docker-engine', 'host-libvirtd']);
    expect(r.checks.find((c) => c.name === 'host-libvirtd')?.detail).toMatch(/pid 77/);
    const text = formatPreflight(r);
    expect(text).toMatch(/^FAIL {2}docker-engine/m);
    expect(text).toMatch(/preflight FAILED: .*docker-engine/);
  });

  it('without a hypervisor set a host libvirtd is a warning; missing virt, modules, live-restore and clock sync warn', async () => {
    const r = await runPreflight({
      ...base,
      ...fakeHost({ cpuFlags: 'sse4_2', modules: ['br_netfilter'] }),
      hypervisorSet: false,
      engine: { info: async () => ({ ...engine, liveRestore: false }) },
    });
    expect(r.ok).toBe(true);
    const failed = Object.fromEntries(r.checks.filter((c) => !c.ok).map((c) => [c.name, c]));
    expect(Object.keys(failed).sort()).toEqual([
      'clock-sync',
      'docker-live-restore',
      'kernel-modules',
      'virtualization',
    ]);
    expect(failed.virtualization!.detail).toMatch(/no vmx\/svm/);
    expect(failed.virtualization!.detail).toMatch(/kvm absent/);
    expect(failed['kernel-modules']!.detail).toMatch(/ebtables, openvswitch/);
    for (const c of Object.values(failed)) expect(c.severity).toBe('warn');
  });
});

describe('preflight on this machine (real /proc, /sys, /dev)', () => {
  it('reports every check with a reason, and the failures that are real here say why', async () => {
    const r = await runPreflight({
      stateDir: mkdtempSync(join(tmpdir(), 'spcd-state-')),
      now: () => Date.now(),
      engine: { info: async () => engine },
    });
    expect(r.checks.map((c) => c.name)).toEqual([
      'docker-engine',
      'docker-live-restore',
      'cgroups',
      'host-libvirtd',
      'virtualization',
      'kernel-modules',
      'disk-images',
      'disk-state',
      'clock-sync',
      'image-signature-tools',
    ]);
    for (const c of r.checks) {
      expect(typeof c.ok).toBe('boolean');
      expect(['block', 'warn']).toContain(c.severity);
      expect(c.detail.length).toBeGreaterThan(5);
    }
    expect(r.ok).toBe(r.blocking.length === 0);
    expect(r.host.kernel).toBeTruthy();
    expect(r.host.distro).toMatch(/\S/);
    // This test VM (see docs/how-to/deploy.md) has no vmx/svm flag, no loadable
    // openvswitch module and no time sync daemon: those checks fail here.
    const failed = r.checks.filter((c) => !c.ok);
    expect(failed.length).toBeGreaterThan(0);
    for (const c of failed)
      expect(c.detail).toMatch(/no |not |absent|unreadable|cannot|off|older|free under/);
  });
});

describe('preflight on a Podman host', () => {
  const podman: DockerInfoLite = { ...engine, kind: 'podman', version: '4.3.1', liveRestore: false };

  it('names Podman, and takes 4.3 as the oldest tested version', () => {
    expect(checkDockerEngine(podman)).toMatchObject({ ok: true, detail: 'Podman 4.3.1' });
    expect(checkDockerEngine({ ...podman, version: '4.2.0' })).toMatchObject({
      ok: false,
      severity: 'warn',
      detail: 'Podman 4.2.0 is older than 4.3, the oldest tested',
    });
  });

  it('blocks when the engine that answers is not the one --engine names', () => {
    expect(checkDockerEngine(engine, 'podman')).toMatchObject({
      ok: false,
      severity: 'block',
      detail: expect.stringMatching(/^--engine podman, but Docker 20\.10\.24 answers on the socket/),
    });
    expect(checkDockerEngine(podman, 'docker')).toMatchObject({ ok: false, severity: 'block' });
    expect(checkDockerEngine(podman, 'podman').ok).toBe(true);
  });

  it('does not ask Podman for live-restore, which it has no daemon for', () => {
    expect(checkLiveRestore(podman)).toMatchObject({ ok: true, detail: expect.stringMatching(/conmon/) });
    expect(checkLiveRestore({ ...engine, liveRestore: false }).ok).toBe(false);
  });
});
