/**
 * Helpers of the OpenStack end-to-end test (test/integration/openstack-e2e.test.ts,
 * docs/explanation/openstack-proof.md): the image builds with their cost, the control and
 * compute sets rendered for one run, a console watcher that stamps every
 * `counter N` line of a guest's console.log, and the qemu process of a domain.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { REPO } from '../support/daemon.js';
import { buildImagesAndGuest, kv, run, startTime, type BuildCost } from './libvirt-e2e-harness.js';

export const CONTROL_SET = join(REPO, 'container-sets-e2e', 'openstack', 'control.yaml');
/** The shipped compute set the run copies unchanged (shipped_set=1 when the copy is the file). */
export const COMPUTE_SET = join(REPO, 'container-sets', 'linuxbridge', 'compute.yaml');
/** This machine's per-host overrides for it, and the passwords (copied with mode 0600). */
export const COMPUTE_OVERRIDES = join(REPO, 'container-sets-e2e', 'hosts', 'openstack-compute.yaml');
export const COMPUTE_SECRETS = join(REPO, 'container-sets-e2e', 'hosts', 'openstack-compute-secrets.yaml');
/** kolla-ansible's named volumes the shipped compute set binds (spcd creates them, never removes them). */
export const COMPUTE_VOLUMES = ['kolla_logs', 'libvirtd', 'nova_compute', 'nova_libvirt_qemu'];
/** neutron-server alone: Nova's API needs Neutron even for servers with no network. */
export const NETWORK_SET = join(REPO, 'container-sets-e2e', 'openstack', 'network.yaml');
export const OPENSTACK_IMAGE = 'spcd-e2e/openstack:zed';
/** The upgrade target of nova_compute and the Linux bridge agent: the same image plus one label (scripts/openstack/build-next-image.sh). */
export const OPENSTACK_NEXT_IMAGE = 'spcd-e2e/openstack:zed-next';

export interface OpenStackBuild extends BuildCost {
  readonly openstackSeconds: number;
  readonly nextSeconds: number;
}

/** Builds or reuses every image the run needs (all cached by input hash) and the guest. */
export async function buildAll(timeoutMs = 45 * 60_000): Promise<OpenStackBuild> {
  const t0 = Date.now();
  const os = await run('bash', [join(REPO, 'scripts/openstack/build-images.sh')], timeoutMs).catch(
    (err: Error) => {
      throw new Error(
        `cannot build ${OPENSTACK_IMAGE} (see /var/cache/spcd-e2e/logs/openstack-zed.log): ${err.message}`,
      );
    },
  );
  // The Open vSwitch variant's image: the openstack image plus Open vSwitch and its agent.
  const ovs = await run('bash', [join(REPO, 'scripts/openvswitch/build-images.sh')], timeoutMs);
  const openstackSeconds = (Date.now() - t0) / 1000;
  const t1 = Date.now();
  const next = await run('bash', [join(REPO, 'scripts/openstack/build-next-image.sh')], 10 * 60_000);
  const nextSeconds = (Date.now() - t1) / 1000;
  const lv = await buildImagesAndGuest(timeoutMs);
  const lines = [
    ...os.stdout.split('\n').filter((l) => l.trim()),
    ...ovs.stdout.split('\n').filter((l) => l.trim()),
    ...next.stdout.split('\n').filter((l) => l.trim()),
    ...lv.lines,
  ];
  return { ...lv, lines, openstackSeconds, nextSeconds };
}

/** Host folders of one run, owned as the containers need them. */
export function prepareRoot(root: string): void {
  const dirs: [string, number, number][] = [
    ['mysql', 42434, 0o750],
    ['keystone/fernet-keys', 42425, 0o700],
    ['keystone/credential-keys', 42425, 0o700],
    ['glance/images', 42415, 0o750],
    ['libvirt/probe', 0, 0o755],
    ['netns', 0, 0o755],
  ];
  for (const [dir, uid, mode] of dirs) {
    mkdirSync(join(root, dir), { recursive: true });
    chownSync(join(root, dir), uid, uid);
    chmodSync(join(root, dir), mode);
  }
  // The shipped set binds the host's /run into nova_libvirt and nova_compute (as
  // Kolla does): the libvirt helpers read ROOT/libvirt/run/libvirt, which is /run/libvirt.
  symlinkSync('/run', join(root, 'libvirt', 'run'));
}

/**
 * The shipped set binds /run with shared propagation, which needs a shared
 * mount above it. systemd makes / rshared at boot; this VM's PID 1 is not
 * systemd, so the run does what it would (docs/explanation/kolla-compatibility.md).
 */
export function ensureSharedRoot(): string {
  const prop = execFileSync('findmnt', ['-no', 'PROPAGATION', '/'], { encoding: 'utf8' }).trim();
  if (prop !== 'shared') execFileSync('mount', ['--make-rshared', '/']);
  return prop;
}

/** Prints the last lines a container logged (for a run that failed before its steps). */
export async function logTail(container: string, lines = 80): Promise<void> {
  const r = await run('/usr/bin/docker', ['logs', '--tail', String(lines), container], 60_000).catch(
    (e: Error) => ({ stdout: '', stderr: e.message }),
  );
  console.log(`--- ${container}, last ${lines} lines ---\n${r.stdout}${r.stderr}`);
}

/** Where a named volume's data is on the host. */
export function volumeDir(name: string): string {
  return execFileSync('/usr/bin/docker', ['volume', 'inspect', '-f', '{{.Mountpoint}}', name], {
    encoding: 'utf8',
  }).trim();
}

/** Removes the named volumes a run's compute set made (a fresh host has none); says which went. */
export function removeVolumes(names: readonly string[]): string[] {
  const gone: string[] = [];
  for (const n of names) {
    try {
      execFileSync('/usr/bin/docker', ['volume', 'rm', n], { stdio: 'ignore' });
      gone.push(n);
    } catch {
      // absent, or still used by a container left behind (its cleanup reports it)
    }
  }
  return gone;
}

/** 1 when FILE is the shipped compute set, byte for byte; throws otherwise (the run proves nothing else). */
export function sameAsShipped(file: string): 1 {
  if (readFileSync(file, 'utf8') !== readFileSync(COMPUTE_SET, 'utf8'))
    throw new Error(`the compute set spcd runs (${file}) differs from ${COMPUTE_SET}`);
  return 1;
}

/**
 * The compute host of one run: the shipped compute set copied as it is into
 * spcd's sets folder, this host's overrides (with the run's label and
 * interface) and secrets (mode 0600) beside it, / made rshared, no volume
 * left from an earlier run. Returns shipped_set (1).
 */
export function computeHost(sb: { setsDir: string; root: string }, r: Rendering): 1 {
  const set = join(sb.setsDir, 'compute.yaml');
  writeFileSync(set, readFileSync(COMPUTE_SET, 'utf8'));
  writeFileSync(join(sb.root, 'overrides.yaml'), renderOverrides(r));
  copyFileSync(COMPUTE_SECRETS, join(sb.root, 'secrets.yaml'));
  chmodSync(join(sb.root, 'secrets.yaml'), 0o600);
  console.log(
    `host: / propagation was ${ensureSharedRoot()}; stale volumes removed: ${removeVolumes(COMPUTE_VOLUMES).join(',') || 'none'}`,
  );
  return sameAsShipped(set);
}

/** After the run's containers are gone: the volumes its compute set made, and /run/libvirt when the run made it. */
export function computeHostDown(hadRunLibvirt: boolean): void {
  console.log(`volumes removed: ${removeVolumes(COMPUTE_VOLUMES).join(',') || 'none'}`);
  if (!hadRunLibvirt) rmSync('/run/libvirt', { recursive: true, force: true });
}

/** The overrides file with this run's label and interface. */
export function renderOverrides(r: Rendering): string {
  return readFileSync(COMPUTE_OVERRIDES, 'utf8')
    .replace(/spcd-e2e\.run: manual/g, `spcd-e2e.run: ${r.runId}`)
    .replace(/\bspcdn-e2e\b/g, r.iface ?? 'spcdn-e2e');
}

export interface Rendering {
  readonly root: string;
  /** Replaces the spcd_e2e_os_ container-name prefix. */
  readonly prefix: string;
  readonly runId: string;
  /** Replaces the interface name spcdn-e2e (the flat physnet's interface, made by the test). */
  readonly iface?: string;
}

/** A set file with this run's root, container names and run label. */
export function renderSetFile(path: string, r: Rendering): string {
  return readFileSync(path, 'utf8')
    .split('/var/tmp/spcd-e2e-openstack')
    .join(r.root)
    .split('spcd_e2e_os_')
    .join(r.prefix)
    .replace(/spcd-e2e\.run: manual/g, `spcd-e2e.run: ${r.runId}`)
    .replace(/\bspcdn-e2e\b/g, r.iface ?? 'spcdn-e2e');
}

export interface Tick {
  /** Host arrival time, epoch ms. */
  readonly at: number;
  readonly n: number;
}

/**
 * Follows a guest's console.log (the file qemu writes with libvirt's
 * stdio_handler=file) every 100 ms and stamps each `counter N` line, and
 * keeps each `spcd-ping` line prefixed with the host's epoch seconds (the
 * stamped form test/e2e/ping-log.ts reads, as libvirt-vm.sh console-watch writes it).
 */
export class ConsoleWatch {
  readonly ticks: Tick[] = [];
  /** `<epoch s> spcd-ping ...`, in arrival order. */
  readonly pings: string[] = [];
  private offset = 0;
  private partial = '';
  private timer: NodeJS.Timeout;

  constructor(readonly file: string) {
    this.timer = setInterval(() => this.poll(), 100);
  }

  poll(): void {
    if (!existsSync(this.file)) return;
    const size = statSync(this.file).size;
    if (size < this.offset) this.offset = 0; // truncated (a new console.log)
    if (size === this.offset) return;
    const fd = openSync(this.file, 'r');
    try {
      const buf = Buffer.alloc(size - this.offset);
      readSync(fd, buf, 0, buf.length, this.offset);
      this.offset = size;
      const text = this.partial + buf.toString('latin1');
      const lines = text.split('\n');
      this.partial = lines.pop() ?? '';
      const at = Date.now();
      for (const l of lines) {
        const m = /counter (\d+)/.exec(l);
        if (m) this.ticks.push({ at, n: Number(m[1]) });
        const p = l.indexOf('spcd-ping ');
        if (p >= 0) this.pings.push(`${(at / 1000).toFixed(3)} ${l.slice(p).replace(/\r/g, '')}`);
      }
    } finally {
      closeSync(fd);
    }
  }

  /** The stamped ping lines as one text (summarizePing's input). */
  pingText(): string {
    return this.pings.join('\n');
  }

  last(): number {
    return this.ticks.at(-1)?.n ?? -1;
  }

  /** Counter values missing (or going backwards) among the lines stamped since `fromMs`; the longest gap. */
  continuity(fromMs: number): { missing: number; maxGapS: number; from: number; to: number; lines: number } {
    const t = this.ticks.filter((x) => x.at >= fromMs);
    let missing = 0;
    let maxGap = 0;
    for (let i = 1; i < t.length; i++) {
      const a = t[i - 1]!;
      const b = t[i]!;
      if (b.n !== a.n + 1) missing += b.n > a.n ? b.n - a.n - 1 : 1_000_000;
      maxGap = Math.max(maxGap, (b.at - a.at) / 1000);
    }
    return { missing, maxGapS: maxGap, from: t[0]?.n ?? -1, to: t.at(-1)?.n ?? -1, lines: t.length };
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

export interface QemuProcess {
  readonly pid: number;
  readonly start: string;
}

/** The qemu of a domain, from libvirt's pid file in the bound /run/libvirt, checked against /proc. */
export function qemuOf(libvirtRoot: string, domain: string): QemuProcess | undefined {
  const file = join(libvirtRoot, 'run/libvirt/qemu', `${domain}.pid`);
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').replace(/\D/g, ''));
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return undefined;
  }
  if (!cmdline.includes(`guest=${domain}`)) return undefined;
  const start = startTime(pid);
  return start ? { pid, start } : undefined;
}

export { kv, run };
