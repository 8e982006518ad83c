/**
 * Helpers for the libvirt end-to-end test driven through spcd's API
 * (test/integration/libvirt-e2e.test.ts): the phase-1 shell helpers
 * (test/e2e/libvirt-vm.sh) called asynchronously, the image and guest builds
 * with their cost, the real-VM set rendered for one run, an /v1/events tap
 * and a small API client. Nothing here blocks the event loop.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, openEvents, type EventsTap } from '../support/api-http.js';
import { REPO } from '../support/daemon.js';
import { ON_PODMAN } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

export const VM_SH = join(REPO, 'test', 'e2e', 'libvirt-vm.sh');
export const SET_TEMPLATE = join(REPO, 'container-sets-e2e', 'libvirt.yaml');
export const IMAGE_9 = 'spcd-e2e/libvirt:bookworm';
export const IMAGE_11 = 'spcd-e2e/libvirt:trixie';

export interface Run {
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command; rejects with its stderr tail on a non-zero exit or at the deadline. */
export function run(
  cmd: string,
  args: string[],
  timeoutMs: number,
  env: NodeJS.ProcessEnv = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { cwd: REPO, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, ...env } },
      (err, stdout, stderr) => {
        if (err) {
          const tail = `${stderr}`.trim().split('\n').slice(-25).join('\n');
          reject(new Error(`${cmd} ${args.join(' ')} failed (${err.message.split('\n')[0]}):\n${tail}`));
        } else resolve({ stdout: `${stdout}`, stderr: `${stderr}` });
      },
    );
  });
}

/** `key=value` pairs of every line of a helper's stdout (later keys win). */
export function kv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of text.matchAll(/(?:^|\s)([a-z_]+)=(\S*)/g)) out[m[1] ?? ''] = m[2] ?? '';
  return out;
}

/** One subcommand of test/e2e/libvirt-vm.sh, parsed. */
export async function vmsh(
  sub: string,
  args: (string | number)[],
  timeoutMs = 60_000,
): Promise<Record<string, string>> {
  const r = await run('bash', [VM_SH, sub, ...args.map(String)], timeoutMs);
  return kv(r.stdout);
}

export interface BuildCost {
  /** Every machine-readable line the build scripts printed. */
  readonly lines: string[];
  readonly imagesSeconds: number;
  readonly guestSeconds: number;
  /** e.g. { bookworm: 'cached-image', trixie: 'built' } */
  readonly sources: Record<string, string>;
}

/**
 * Builds or reuses both libvirt images and the guest (cached by input hash).
 * Throws a clear error when they cannot be built, e.g. without the Debian mirror.
 */
export async function buildImagesAndGuest(timeoutMs = 15 * 60_000): Promise<BuildCost> {
  const lines: string[] = [];
  const t0 = Date.now();
  let images: Run;
  try {
    images = await run(
      'bash',
      [join(REPO, 'scripts/libvirt/build-images.sh'), 'bookworm', 'trixie'],
      timeoutMs,
    );
  } catch (err) {
    throw new Error(
      `cannot build the libvirt images spcd-e2e/libvirt:bookworm and :trixie (debootstrap needs the Debian mirror; see /var/cache/spcd-e2e/logs/): ${(err as Error).message}`,
    );
  }
  const imagesSeconds = (Date.now() - t0) / 1000;
  const t1 = Date.now();
  let guest: Run;
  try {
    guest = await run('bash', [join(REPO, 'scripts/libvirt/build-guest.sh')], timeoutMs);
  } catch (err) {
    throw new Error(
      `cannot build the test guest (kernel package from the Debian mirror): ${(err as Error).message}`,
    );
  }
  const guestSeconds = (Date.now() - t1) / 1000;
  if (ON_PODMAN) lines.push(...(await loadIntoPodman()));
  const sources: Record<string, string> = {};
  for (const l of `${images.stdout}\n${guest.stdout}`.split('\n')) {
    if (!l.trim()) continue;
    lines.push(l.trim());
    const p = kv(l);
    if (p.image && p.suite && p.source) sources[p.suite] = p.source;
    if (p.phase === 'guest' && p.source) sources.guest = p.source;
  }
  return { lines, imagesSeconds, guestSeconds, sources };
}

/** Copies both images from Docker, where they are built, into Podman's store (when it lacks them). */
async function loadIntoPodman(): Promise<string[]> {
  const dockerOnly = { SPCD_DOCKER_SOCKET: '/var/run/docker.sock' };
  const t0 = Date.now();
  const r = await run('bash', [join(REPO, 'scripts/podman/ensure-podman.sh')], 5 * 60_000, dockerOnly);
  const l = await run(
    'bash',
    [join(REPO, 'scripts/podman/load-images.sh'), IMAGE_9, IMAGE_11],
    10 * 60_000,
    dockerOnly,
  );
  const s = ((Date.now() - t0) / 1000).toFixed(1);
  return [...`${r.stdout}\n${l.stdout}`.split('\n').filter((x) => x.trim()), `podman_images_s=${s}`];
}

/** Field 22 of /proc/PID/stat (start time in clock ticks since boot); comm may hold spaces. */
export function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[22 - 3];
  } catch {
    return undefined;
  }
}

export interface SetRendering {
  readonly root: string;
  readonly container: string;
  readonly runId: string;
  readonly image?: string;
  /** Drop the /sys/fs/cgroup bind (a definition that breaks a VM-safety rule). */
  readonly dropCgroupBind?: boolean;
  /** Drop the bootstrap task that warms qemu's capabilities cache (SPCD_E2E_NO_WARM=1, for the window without it). */
  readonly noWarm?: boolean;
  /** libvirtd writes a timestamped debug log of a few categories (SPCD_E2E_TRACE=1, libvirt-phases.ts). */
  readonly trace?: { readonly file: string; readonly filters: string };
  /** On Podman, which refuses an init process in a container of the host's PID namespace: no `init`. */
  readonly podman?: boolean;
}

/** container-sets-e2e/libvirt.yaml with this run's root, container name and run label. */
export function renderSet(r: SetRendering): string {
  let text = readFileSync(SET_TEMPLATE, 'utf8')
    .split('/var/tmp/spcd-e2e-libvirt')
    .join(r.root)
    .split('spcd_e2e_libvirt')
    .join(r.container)
    .replace('spcd-e2e.run: manual', `spcd-e2e.run: ${r.runId}`);
  if (r.image) text = text.replace(`image: ${IMAGE_9}`, `image: ${r.image}`);
  if (r.podman) text = text.replace(/^\s*init: true\n/m, '');
  if (r.dropCgroupBind) text = text.replace(/^\s*- \/sys\/fs\/cgroup:\/sys\/fs\/cgroup\n/m, '');
  // Without the cache-warming bootstrap task (measuring the window it saves).
  if (r.noWarm) text = text.replace(/^ *# warm-qemu-caps-begin\n[\s\S]*?# warm-qemu-caps-end\n/m, '');
  // libvirt reads these two variables over its config: both daemons (old and new) append to one file.
  // Set for libvirtd alone (a container environment would reach every virsh exec'd in it too).
  if (r.trace)
    text = text.replace(
      /^( +)image: (.*)$/m,
      `$1image: $2\n$1command: [env, 'LIBVIRT_LOG_OUTPUTS=1:file:${r.trace.file} 3:stderr', 'LIBVIRT_LOG_FILTERS=${r.trace.filters}', /usr/sbin/libvirtd]`,
    );
  return text;
}

export interface SpcdEventLine {
  readonly type: string;
  readonly at: number;
  readonly operationId?: string;
  /** operation events: the verb or heal, and its container or set */
  readonly kind?: string;
  readonly target?: string;
  /** engine events */
  readonly available?: boolean;
  readonly container?: string;
  readonly step?: string;
  readonly outcome?: string;
  readonly phase?: string;
  readonly generation?: number;
  readonly detail?: string;
  readonly ok?: boolean;
  readonly error?: { code: string; message: string };
  readonly result?: Record<string, unknown>;
  /** A dependency event's verdict ('down' or 'up'). */
  readonly status?: string;
  /** census events */
  readonly action?: string;
  readonly before?: readonly string[];
  readonly after?: readonly string[];
  readonly missing?: readonly string[];
  readonly added?: readonly string[];
}

/**
 * A client of GET /v1/events (test/support/api-http.ts's openEvents): keeps
 * every event it has read; close() throws when a line broke the API document.
 */
export class EventTap {
  private constructor(private readonly tap: EventsTap) {}

  static async open(socketPath: string): Promise<EventTap> {
    return new EventTap(await openEvents(socketPath));
  }

  /** Each line was checked against the document's EventLine schema as it came (see close()). */
  get events(): readonly SpcdEventLine[] {
    return this.tap.events as unknown as readonly SpcdEventLine[];
  }

  find(pred: (e: SpcdEventLine) => boolean): SpcdEventLine | undefined {
    return this.events.find(pred);
  }

  wait(what: string, pred: (e: SpcdEventLine) => boolean, timeoutMs: number): Promise<SpcdEventLine> {
    return waitFor(what, () => this.find(pred), { timeoutMs, intervalMs: 50 });
  }

  /** The operation's final event (succeeded or failed). */
  finished(operationId: string, timeoutMs: number): Promise<SpcdEventLine> {
    return this.wait(
      `operation ${operationId} to finish`,
      (e) =>
        e.type === 'operation' &&
        e.operationId === operationId &&
        (e.phase === 'succeeded' || e.phase === 'failed'),
      timeoutMs,
    );
  }

  close(): void {
    this.tap.close();
  }
}

export interface ContainerView {
  name: string;
  generation: number;
  image: string;
  containerId: string | null;
  state: string;
  health: string;
  startedAt: string | null;
  lastError: { code: string; message: string; at: string } | null;
  census?: Record<string, unknown>;
}

/** The few API calls the test makes, over spcd's unix socket. */
export class SpcdApi {
  constructor(private readonly socket: string) {}

  async container(name: string): Promise<ContainerView> {
    const a = await call(this.socket, 'GET', `/v1/containers/${name}`);
    if (a.status !== 200) throw new Error(`GET /v1/containers/${name}: ${a.status} ${a.text}`);
    return a.json() as ContainerView;
  }

  async generations(
    name: string,
  ): Promise<{ generation: number; outcome: string; image: string; reason?: string }[]> {
    const a = await call(this.socket, 'GET', `/v1/containers/${name}/generations`);
    if (a.status !== 200) throw new Error(`GET /v1/containers/${name}/generations: ${a.status} ${a.text}`);
    return (
      a.json() as { generations: { generation: number; outcome: string; image: string; reason?: string }[] }
    ).generations;
  }

  /** Any read route's JSON answer (200 only). */
  async get<T>(path: string): Promise<T> {
    const a = await call(this.socket, 'GET', path);
    if (a.status !== 200) throw new Error(`GET ${path}: ${a.status} ${a.text}`);
    return a.json() as T;
  }

  /** POSTs a verb; returns the operation id of the 202 answer. */
  async post(path: string, body: object): Promise<string> {
    const a = await call(this.socket, 'POST', path, body);
    if (a.status !== 202) throw new Error(`POST ${path}: ${a.status} ${a.text}`);
    return (a.json() as { operationId: string }).operationId;
  }
}
