import { connect } from 'node:net';
import { inspect } from '../support/docker.js';

/**
 * The shipped demo set (container-sets/demo/demo.yaml) as the install test
 * runs it: its containers' fixed names, the port demo_compute serves, and the
 * per-host overrides this host needs. The set file itself is the package's,
 * unchanged; what differs here goes in /etc/spcd/overrides.yaml, as an
 * operator's would.
 */
export const DEMO = ['demo_libvirt', 'demo_compute', 'demo_ovs_agent'] as const;
export const DEMO_PORT = 18775;
/** The container upgraded while the package is: nothing depends on it. */
export const UPGRADED = 'demo_ovs_agent';
/** How long the upgraded container's check takes: its health gate spans the package's restart of spcd. */
export const GATE_SECONDS = 15;

/**
 * The host's overrides. The shipped hosts/no-privileged.yaml when
 * `--privileged` cannot start on this engine; and for demo_ovs_agent, a check
 * run inside the container: the shipped one (`use: process`) mounts spcd's
 * check scripts from spcd's own file system, which is the systemd box's, not
 * the engine host's. The check takes GATE_SECONDS (start_interval: the gate's
 * first run is at once, not at a random point of the interval).
 */
export function hostOverrides(noPrivileged: string | undefined): string {
  const base = noPrivileged ?? 'containers:\n';
  return `${base}  ${UPGRADED}:
    healthchecks:
      - name: process
        exec: [sh, -c, 'sleep ${GATE_SECONDS} && pidof demo-service']
        interval: 30s
        timeout: 25s
        start_period: 60s
        start_interval: 2s
`;
}

/**
 * The demo set's names and port are the engine's and the host's, not this
 * test's: a demo (scripts/demo.sh) or a second install test on this engine
 * would collide, and overrides cannot rename a container. The test refuses
 * to start then (it never removes what it did not create).
 */
export async function assertDemoFree(): Promise<void> {
  const taken = [];
  for (const name of DEMO) if (await inspect(name)) taken.push(`container ${name}`);
  if (await listening(DEMO_PORT)) taken.push(`port 127.0.0.1:${DEMO_PORT}`);
  if (taken.length)
    throw new Error(`the demo set's ${taken.join(', ')} already in use on this host: stop that demo first`);
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

export interface Seen {
  readonly id: string;
  readonly startedAt: string;
  readonly restartCount: number;
  readonly image: string;
  readonly generation: string | undefined;
  readonly running: boolean;
}

/** Each demo container under its name now. */
export async function snapshot(): Promise<Map<string, Seen>> {
  const out = new Map<string, Seen>();
  for (const name of DEMO) {
    const c = await inspect(name);
    if (c)
      out.set(name, {
        id: c.Id,
        startedAt: c.State.StartedAt,
        restartCount: c.RestartCount ?? 0,
        image: c.Config.Image,
        generation: c.Config.Labels['spcd.generation'],
        running: c.State.Running,
      });
  }
  return out;
}

/** The containers of `before` that are not the same running instance in `after` (recreated, restarted or stopped). */
export function restarted(before: Map<string, Seen>, after: Map<string, Seen>): string[] {
  return [...before.entries()]
    .filter(([name, b]) => {
      const a = after.get(name);
      return (
        !a || !a.running || a.id !== b.id || a.startedAt !== b.startedAt || a.restartCount !== b.restartCount
      );
    })
    .map(([name]) => name);
}
