/**
 * The shipped compute sets started the way a Kolla image starts, as far as
 * it takes to prove what a real host needs: Kolla's own kolla_start (start.sh)
 * and kolla_set_configs (set_configs.py) from ../shared/peers/kolla-2024.1/,
 * in spcd-e2e/kolla-runtime:bookworm (Kolla's users at Kolla's uids, and
 * /var/log/kolla root:kolla 2775 as in Kolla's base image), each container's
 * own config.json and Kolla's service user, with a fresh named volume at
 * /var/log/kolla. The image's extend_start then does what a Kolla service
 * image's does first, under kolla_start's errexit: it makes
 * /var/log/kolla/<service> as the service user and writes there. For
 * nova_compute it also opens the libvirt socket of a real libvirtd run with
 * the shipped libvirtd.conf.
 *
 * The controls show why: the same start with a host folder that dockerd made
 * at /var/log/kolla exits, and nova cannot open a socket whose group is root.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../agent/log.js';
import { allContainers, findSet, hasKollaConfig, type ContainerSpec } from '../../agent/model/spec.js';
import { Renderer, type RenderedConfig } from '../../agent/render/renderer.js';
import { mergeValues } from '../../agent/render/values.js';
import { loadDesired } from '../../agent/spec/load.js';
import { REPO } from '../support/daemon.js';
import { cleanupInstance, docker } from '../support/docker.js';
import { sampleValues } from '../support/sample-values.js';
import { waitFor } from '../support/wait.js';

const RUNTIME = 'spcd-e2e/kolla-runtime:bookworm';
const LIBVIRT = 'spcd-e2e/libvirt:bookworm';
const INSTANCE = `t-kolla-start-${process.pid}`;
const VOLUME_PREFIX = `spcd-t-kolla-start-${process.pid}`;
const dir = mkdtempSync(join(tmpdir(), 'spcd-kolla-start-'));
const d = docker();

/** Kolla's image user and the log folder its service's extend_start makes. */
const SERVICE: Record<string, { user: string; logDir: string }> = {
  nova_libvirt: { user: 'root', logDir: 'libvirt' },
  nova_compute: { user: 'nova', logDir: 'nova' },
  neutron_openvswitch_agent: { user: 'neutron', logDir: 'neutron' },
  neutron_linuxbridge_agent: { user: 'neutron', logDir: 'neutron' },
  openvswitch_db: { user: 'root', logDir: 'openvswitch' },
  openvswitch_vswitchd: { user: 'root', logDir: 'openvswitch' },
};

/** Every container with config in both shipped compute sets (nova_* once), rendered from the sample values. */
async function shippedContainers(): Promise<{ spec: ContainerSpec; rendered: RenderedConfig }[]> {
  const { values, secretValues } = await sampleValues();
  const renderer = new Renderer({ templatesDir: join(REPO, 'templates'), log: silentLogger() });
  const out = new Map<string, { spec: ContainerSpec; rendered: RenderedConfig }>();
  for (const setsDir of ['container-sets', 'container-sets/linuxbridge']) {
    const desired = await loadDesired({
      setsDir: join(REPO, setsDir),
      checkLibraryFile: join(REPO, 'healthchecks', 'library.yaml'),
    });
    const compute = findSet(desired.sets, 'compute');
    // The set's own defaults under the sample values (the Linux bridge agent's live there).
    const merged = mergeValues({
      setDefaults: { ...compute?.defaults },
      globals: values,
      hostValues: {},
      secrets: {},
    });
    for (const spec of allContainers(compute ? [compute] : []).filter(hasKollaConfig)) {
      if (!out.has(spec.name))
        out.set(spec.name, { spec, rendered: renderer.renderContainer(spec, merged.values, secretValues) });
    }
  }
  return [...out.values()];
}

/** Writes a container's rendered files and config.json where Kolla's config dir is bound from. */
function writeConfigDir(name: string, r: RenderedConfig): string {
  const configDir = join(dir, 'config', name);
  for (const f of r.files) {
    mkdirSync(dirname(join(configDir, f.dest)), { recursive: true });
    writeFileSync(join(configDir, f.dest), f.content, { mode: 0o644 });
  }
  writeFileSync(join(configDir, 'config.json'), r.configJson, { mode: 0o644 });
  return configDir;
}

/** Demultiplexes docker's 8-byte frame headers. */
function demux(buf: Buffer): string {
  const parts: string[] = [];
  for (let i = 0; i + 8 <= buf.length;) {
    const len = buf.readUInt32BE(i + 4);
    parts.push(buf.subarray(i + 8, i + 8 + len).toString('utf8'));
    i += 8 + len;
  }
  return parts.join('');
}

/** Runs the runtime image's own CMD (kolla_start) as `user` until it exits. */
async function kollaStart(opts: {
  user: string;
  env: string[];
  binds: string[];
}): Promise<{ code: number; out: string }> {
  const c = await d.createContainer({
    Image: RUNTIME,
    User: opts.user,
    Env: ['KOLLA_CONFIG_STRATEGY=COPY_ALWAYS', ...opts.env],
    Labels: { 'spcd.instance': INSTANCE },
    HostConfig: { NetworkMode: 'none', Binds: opts.binds },
  });
  try {
    await c.start();
    const { StatusCode } = (await c.wait()) as { StatusCode: number };
    return { code: StatusCode, out: demux(await c.logs({ stdout: true, stderr: true, follow: false })) };
  } finally {
    await c.remove({ force: true });
  }
}

async function freshVolume(name: string): Promise<string> {
  const full = `${VOLUME_PREFIX}-${name}`;
  await d.createVolume({ Name: full, Labels: { 'spcd.instance': INSTANCE } });
  return full;
}

let containers: { spec: ContainerSpec; rendered: RenderedConfig }[];
let libvirtd: Dockerode.Container | undefined;
const runLibvirt = join(dir, 'run-libvirt');

/** A real libvirtd with the shipped libvirtd.conf (TCP off), its socket in a host folder. */
async function startLibvirtd(libvirtdConf: string): Promise<void> {
  mkdirSync(runLibvirt, { recursive: true });
  const confDir = join(dir, 'libvirtd');
  mkdirSync(confDir, { recursive: true });
  writeFileSync(join(confDir, 'libvirtd.conf'), libvirtdConf);
  libvirtd = await d.createContainer({
    Image: LIBVIRT,
    // The image has Kolla's nova user (42436), as Kolla's nova-libvirt image
    // does (scripts/libvirt/build-images.sh): libvirtd names its clients by it.
    Entrypoint: ['libvirtd'],
    Cmd: ['-f', '/cfg/libvirtd.conf'],
    Labels: { 'spcd.instance': INSTANCE },
    HostConfig: {
      NetworkMode: 'none',
      Binds: [`${runLibvirt}:/run/libvirt`, `${confDir}:/cfg:ro`],
      CapAdd: ['ALL'],
      CapDrop: ['SYS_RESOURCE'],
    },
  });
  await libvirtd.start();
  await waitFor('the libvirt socket', () => {
    try {
      return execFileSync('stat', ['-c', '%U:%g %a', join(runLibvirt, 'libvirt-sock')])
        .toString()
        .trim();
    } catch {
      return undefined;
    }
  });
}

beforeAll(async () => {
  for (const image of [RUNTIME, LIBVIRT]) {
    await d
      .getImage(image)
      .inspect()
      .catch(() => {
        // Global setup builds the runtime image; the libvirt one is cached by its own script.
        if (image === LIBVIRT)
          execFileSync('bash', [join(REPO, 'scripts/libvirt/build-images.sh'), 'bookworm'], {
            stdio: 'inherit',
          });
        else throw new Error(`${image} is missing: scripts/kolla-runtime/build-image.sh builds it`);
      });
  }
  containers = await shippedContainers();
}, 600_000);

afterAll(async () => {
  await cleanupInstance(INSTANCE);
  const { Volumes } = await d.listVolumes({ filters: { label: [`spcd.instance=${INSTANCE}`] } });
  for (const v of Volumes ?? [])
    await d
      .getVolume(v.Name)
      .remove()
      .catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

describe('the shipped compute containers started through kolla_start with fresh named volumes', () => {
  it('covers every container with config in both compute sets, each with kolla_logs as kolla-ansible binds it', () => {
    expect(containers.map((c) => c.spec.name).sort()).toEqual(Object.keys(SERVICE).sort());
    for (const { spec } of containers)
      expect(spec.binds, spec.name).toContainEqual({
        kind: 'volume',
        source: 'kolla_logs',
        target: '/var/log/kolla',
        readOnly: false,
      });
  });

  it('each service user makes and writes its folder in a fresh kolla_logs volume', async () => {
    const logs = await freshVolume('kolla_logs');
    for (const { spec, rendered } of containers) {
      const svc = SERVICE[spec.name]!;
      const r = await kollaStart({
        user: svc.user,
        env: [`KOLLA_PROBE_LOG_DIR=${svc.logDir}`],
        binds: [
          `${writeConfigDir(spec.name, rendered)}:/var/lib/kolla/config_files:ro`,
          `${logs}:/var/log/kolla`,
        ],
      });
      expect(r.code, `${spec.name}: ${r.out}`).toBe(0);
      expect(r.out).toContain(`probe: ${svc.user} wrote /var/log/kolla/${svc.logDir}/probe.log`);
    }
  });

  it('control: with a host folder dockerd made at /var/log/kolla, a non-root service exits at start', async () => {
    const hostLogs = join(dir, 'host-var-log-kolla');
    mkdirSync(hostLogs);
    chmodSync(hostLogs, 0o755);
    const { spec, rendered } = containers.find((c) => c.spec.name === 'nova_compute')!;
    const r = await kollaStart({
      user: 'nova',
      env: ['KOLLA_PROBE_LOG_DIR=nova'],
      binds: [
        `${writeConfigDir(spec.name, rendered)}:/var/lib/kolla/config_files:ro`,
        `${hostLogs}:/var/log/kolla`,
      ],
    });
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toContain("mkdir: cannot create directory '/var/log/kolla/nova': Permission denied");
  });

  it("nova_compute's user opens the socket of a libvirtd run with the shipped libvirtd.conf", async () => {
    const libvirt = containers.find((c) => c.spec.name === 'nova_libvirt')!;
    const conf = libvirt.rendered.files.find((f) => f.dest === 'libvirtd.conf')!.content;
    // The sample globals turn TCP on for migration; this libvirtd has no network.
    await startLibvirtd(conf.replace(/^listen_tcp = 1$/m, 'listen_tcp = 0'));
    const sock = execFileSync('stat', ['-c', '%u:%g %a', join(runLibvirt, 'libvirt-sock')])
      .toString()
      .trim();
    expect(sock).toBe('0:42436 770');
    const { spec, rendered } = containers.find((c) => c.spec.name === 'nova_compute')!;
    const configDir = writeConfigDir(spec.name, rendered);
    const probe = (group: string) =>
      kollaStart({
        user: 'nova',
        env: ['KOLLA_PROBE_LOG_DIR=nova', 'KOLLA_PROBE_SOCKET=/run/libvirt/libvirt-sock'],
        binds: [
          `${configDir}:/var/lib/kolla/config_files:ro`,
          `${group}:/var/log/kolla`,
          `${runLibvirt}:/run/libvirt`,
        ],
      });
    const ok = await probe(await freshVolume('kolla_logs_socket'));
    expect(ok.code, ok.out).toBe(0);
    expect(ok.out).toContain('probe: nova opened /run/libvirt/libvirt-sock');
    // Control: the socket as a root:root 0770 group leaves it.
    execFileSync('chown', ['0:0', join(runLibvirt, 'libvirt-sock')]);
    const refused = await probe(await freshVolume('kolla_logs_refused'));
    expect(refused.code).not.toBe(0);
    expect(refused.out).toContain('PermissionError');
  });
});
