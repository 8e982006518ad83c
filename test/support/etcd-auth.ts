/**
 * etcd's own authentication on a test cluster, with the roles docs/explanation/fleet-over-etcd.md
 * ("etcd roles") gives the fleet: `spcd-fleet-writer` (writes the desired
 * key) and one `spcd-node-<name>` per node (writes only its own keys). Each
 * user's password is written to a file, as spcd's --etcd-password-file
 * reads it. Turns authentication on last (then only users get in).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Range, type Etcd3 } from 'etcd3';
import { connectEtcd } from '../../agent/etcd/client.js';

export interface EtcdUser {
  readonly user: string;
  readonly passwordFile: string;
}

export interface FleetAuth {
  readonly root: EtcdUser;
  readonly writer: EtcdUser;
  readonly nodes: Readonly<Record<string, EtcdUser>>;
}

async function addUser(admin: Etcd3, dir: string, user: string, role: string): Promise<EtcdUser> {
  const password = randomBytes(12).toString('hex');
  const passwordFile = join(dir, `${user}.password`);
  writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  await admin.user(user).create(password);
  await admin.user(user).addRole(role);
  return { user, passwordFile };
}

/** The roles of docs/explanation/fleet-over-etcd.md, a user per role, then `auth enable`. */
export async function enableFleetAuth(
  endpoints: readonly string[],
  prefix: string,
  nodes: readonly string[],
  dir: string,
): Promise<FleetAuth> {
  const admin = connectEtcd({ endpoints });
  try {
    await admin.role('root').create();
    const root = await addUser(admin, dir, 'root', 'root');
    // The fleet writer: the desired document (and the ledger, to clear it); reads the fleet.
    await admin.role('spcd-fleet-writer').create();
    await admin.role('spcd-fleet-writer').grant([
      { permission: 'Read', range: Range.prefix(prefix) },
      { permission: 'Readwrite', key: `${prefix}desired` },
      { permission: 'Readwrite', key: `${prefix}rollout/ledger` },
    ]);
    const writer = await addUser(admin, dir, 'spcd-fleet-writer', 'spcd-fleet-writer');
    const byNode: Record<string, EtcdUser> = {};
    for (const node of nodes) {
      const role = `spcd-node-${node}`;
      await admin.role(role).create();
      await admin.role(role).grant([
        { permission: 'Read', range: Range.prefix(prefix) },
        { permission: 'Readwrite', key: `${prefix}nodes/${node}` },
        { permission: 'Readwrite', range: Range.prefix(`${prefix}queue/${node}/`) },
        { permission: 'Readwrite', key: `${prefix}rollout/ledger` },
      ]);
      byNode[node] = await addUser(admin, dir, role, role);
    }
    await admin.auth.authEnable();
    return { root, writer, nodes: byNode };
  } finally {
    admin.close();
  }
}
