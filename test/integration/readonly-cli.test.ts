/**
 * spcctl run by a member of the read-only group only (a real user made with
 * useradd, spcctl as a real process under its uid, a real spcd): its reads
 * go to the read-only socket when the admin socket refuses it, its writes
 * are refused by the kernel (admin socket) or by spcd (READ_ONLY_SOCKET
 * with --read-only), both exit 3.
 */
import { chmodSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, SpcdProcess, sandbox, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { createUser, ensureGroup, removeGroup, removeUser, runAs, type TestUser } from '../support/users.js';
import { waitFor } from '../support/wait.js';

const ADMIN_GROUP = 'spcd-cli-admin';
const READ_GROUP = 'spcd-cli-read';
const READER = 'spcd-cli-reader';

const sb: Sandbox = sandbox('ro-cli');
const n = (s: string): string => `${sb.instance}-${s}`;
let spcd: SpcdProcess | undefined;
let reader: TestUser;

const spcctl = (args: string[]): ReturnType<typeof runAs> =>
  runAs(reader, [process.execPath, join(REPO, 'bin', 'spcctl.js'), '--socket', sb.socket, ...args]);

beforeAll(async () => {
  ensureGroup(ADMIN_GROUP);
  ensureGroup(READ_GROUP);
  reader = createUser(READER, [READ_GROUP]);
  chmodSync(sb.root, 0o755);
  writeSet(
    sb,
    'cli.yaml',
    `set: cli\ncontainers:\n  ${n('web')}:\n    image: spcd-demo/service:1\n    command: [demo-service, sleep]\n    network: none\n    stop_grace_period: 1s\n`,
  );
  spcd = SpcdProcess.start(sb, ['--admin-group', ADMIN_GROUP, '--readonly-group', READ_GROUP]);
  await spcd.ready();
  await waitFor('web running', async () => (await inspect(n('web')))?.State.Running);
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  removeUser(READER);
  removeGroup(READ_GROUP);
  removeGroup(ADMIN_GROUP);
  rmSync(sb.root, { recursive: true, force: true });
});

describe('spcctl for the read-only group', () => {
  it('reads through the read-only socket when the admin socket refuses it', async () => {
    const status = await spcctl(['status']);
    expect(status.stderr).toBe('');
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(n('web'));
    const json = await spcctl(['--read-only', '-o', 'json', 'status']);
    expect(json.code).toBe(0);
    expect(JSON.stringify(JSON.parse(json.stdout))).toContain(n('web'));
  });

  it('cannot write: the admin socket refuses the connection, the read-only socket the request', async () => {
    const viaAdmin = await spcctl(['stop', n('web')]);
    expect(viaAdmin.code).toBe(3);
    expect(viaAdmin.stderr).toContain(`permission denied on ${sb.socket}`);
    const viaReadOnly = await spcctl(['--read-only', 'stop', n('web')]);
    expect(viaReadOnly.code).toBe(3);
    expect(viaReadOnly.stderr).toContain('READ_ONLY_SOCKET');
    const logs = await spcctl(['logs', n('web')]);
    expect(logs.code).toBe(3);
    expect(logs.stderr).toContain('READ_ONLY_SOCKET');
    expect((await inspect(n('web')))?.State.Running).toBe(true);
  });
});
