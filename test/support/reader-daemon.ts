/**
 * A real spcd with an admin group and a read-only group, one running
 * container, and a real user (useradd) in the read-only group only: what
 * the tests of the read-only socket share. close() stops spcd and removes
 * the containers, the user, the groups and the sandbox.
 */
import { chmodSync, rmSync } from 'node:fs';
import { SpcdProcess, demoContainerYaml, sandbox, writeSet, type Sandbox } from './daemon.js';
import { cleanupInstance, inspect } from './docker.js';
import { createUser, ensureGroup, removeGroup, removeUser, type TestUser } from './users.js';
import { waitFor } from './wait.js';

export interface ReaderDaemon {
  readonly sb: Sandbox;
  readonly spcd: SpcdProcess;
  readonly reader: TestUser;
  /** The running container's name. */
  readonly web: string;
  close(): Promise<void>;
}

/** `prefix` names the sandbox, the groups (`<prefix>-admin`, `<prefix>-read`) and the user (`<prefix>-reader`). */
export async function startReaderDaemon(prefix: string): Promise<ReaderDaemon> {
  const adminGroup = `${prefix}-admin`;
  const readGroup = `${prefix}-read`;
  const user = `${prefix}-reader`;
  ensureGroup(adminGroup);
  ensureGroup(readGroup);
  const reader = createUser(user, [readGroup]);
  const sb = sandbox(prefix);
  chmodSync(sb.root, 0o755); // traversable: the gates under test are the sockets' own directories and modes
  const web = `${sb.instance}-web`;
  writeSet(sb, 'ro.yaml', `set: ro\ncontainers:\n${demoContainerYaml(web, ['stop_grace_period: 1s'])}`);
  const spcd = SpcdProcess.start(sb, ['--admin-group', adminGroup, '--readonly-group', readGroup]);
  const close = async (): Promise<void> => {
    await spcd.stop();
    await cleanupInstance(sb.instance);
    removeUser(user);
    removeGroup(readGroup);
    removeGroup(adminGroup);
    rmSync(sb.root, { recursive: true, force: true });
  };
  try {
    await spcd.ready();
    await waitFor('the container running', async () => (await inspect(web))?.State.Running);
  } catch (err) {
    await close();
    throw err;
  }
  return { sb, spcd, reader, web, close };
}
