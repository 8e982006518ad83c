/**
 * The OpenStack control set (container-sets-e2e/openstack/control.yaml) as a
 * test runs it: a copy with the test's own host folders (owned by Kolla's
 * uids), container names, run label and loopback ports, so that two runs (or
 * a hand-run set on the default ports) never meet on this host. The helpers
 * reach the APIs only through containers of the set, on 127.0.0.1.
 */
import { chmodSync, chownSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { execIn, type ExecResult } from './containers.js';
import { REPO, writeSet, type Sandbox } from './daemon.js';

export const CONTROL_SET = join(REPO, 'container-sets-e2e', 'openstack', 'control.yaml');

/** Every port the set binds on 127.0.0.1, by name, as control.yaml writes it. */
export const CONTROL_PORTS = {
  mariadb: 13306,
  amqp: 16572,
  erlang_dist: 26572,
  epmd: 14369,
  memcached: 11311,
  keystone: 15000,
  placement: 18778,
  glance: 19292,
  nova_api: 18774,
} as const;
export type ControlPorts = Record<keyof typeof CONTROL_PORTS, number>;

export interface ControlSet {
  /** The container name of a service of the set: `name('nova_api')`. */
  name(service: string): string;
  readonly ports: ControlPorts;
  /** The host folder bound into the containers (MariaDB's data, Keystone's keys, Glance's store). */
  readonly hostRoot: string;
}

/** Host folders the set binds, with the Kolla uid that owns each and its mode. */
const HOST_DIRS: [string, number, number][] = [
  ['mysql', 42434, 0o750],
  ['keystone/fernet-keys', 42425, 0o700],
  ['keystone/credential-keys', 42425, 0o700],
  ['glance', 42415, 0o750],
];

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ host: '127.0.0.1', port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/**
 * An offset for every port (1000..5999, below the kernel's ephemeral range)
 * that maps none of them onto another of the set's default ports and finds
 * them all free on 127.0.0.1 now.
 */
export async function freePorts(seed = process.pid): Promise<ControlPorts> {
  const base = Object.values(CONTROL_PORTS) as number[];
  for (let i = 0; i < 500; i++) {
    const offset = 1000 + ((seed * 7 + i * 11) % 5000);
    const shifted = base.map((p) => p + offset);
    if (shifted.some((p) => base.includes(p))) continue;
    const free = await Promise.all(shifted.map(portFree));
    if (free.every(Boolean)) {
      return Object.fromEntries(
        Object.entries(CONTROL_PORTS).map(([k, v]) => [k, v + offset]),
      ) as ControlPorts;
    }
  }
  throw new Error('no free block of ports for the openstack control set on 127.0.0.1');
}

/**
 * Writes the test's copy of the control set into the sandbox: every
 * /var/tmp/spcd-e2e-openstack becomes `hostRoot`, every spcd_e2e_os_ prefix
 * `prefix`, the run label the sandbox's instance, and every port its shifted
 * number (the numbers appear in the file only as ports).
 */
export function writeControlSet(sb: Sandbox, opts: { prefix: string; ports: ControlPorts }): ControlSet {
  const hostRoot = join(sb.root, 'host');
  for (const [dir, uid, mode] of HOST_DIRS) {
    mkdirSync(join(hostRoot, dir), { recursive: true });
    chownSync(join(hostRoot, dir), uid, uid);
    chmodSync(join(hostRoot, dir), mode);
  }
  let text = readFileSync(CONTROL_SET, 'utf8')
    .split('/var/tmp/spcd-e2e-openstack')
    .join(hostRoot)
    .split('spcd_e2e_os_')
    .join(opts.prefix)
    .replace(/spcd-e2e\.run: manual/g, `spcd-e2e.run: ${sb.instance}`);
  const byDefault = new Map(
    Object.entries(CONTROL_PORTS).map(([k, v]) => [String(v), opts.ports[k as keyof ControlPorts]]),
  );
  text = text.replace(/\b\d{5}\b/g, (m) => String(byDefault.get(m) ?? m));
  writeSet(sb, 'control.yaml', text);
  return { name: (svc) => `${opts.prefix}${svc}`, ports: opts.ports, hostRoot };
}

/** The openstack CLI as the set's admin, in a container `id` of the set (host network, Keystone on 127.0.0.1). */
export function osc(id: string, ports: ControlPorts, args: string[]): Promise<ExecResult> {
  return execIn(
    id,
    [
      'openstack',
      `--os-auth-url=http://127.0.0.1:${ports.keystone}/v3`,
      '--os-username=admin',
      '--os-password=e2e-admin',
      '--os-project-name=admin',
      '--os-user-domain-name=Default',
      '--os-project-domain-name=Default',
      '--os-region-name=RegionOne',
      '--os-interface=internal',
      ...args,
    ],
    { timeoutMs: 180_000 },
  );
}
