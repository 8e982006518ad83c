/**
 * Attack: a monitoring account, given the read-only group so it can read
 * spcd's status, tries to change what runs. A real spcd (bin/spcd.js) runs
 * with an admin group and a read-only group; a real user made here with
 * useradd, member of the read-only group only, drives curl as itself
 * (setpriv). It reads status, health and metrics through the read-only
 * socket; every write it sends there (POST stop of a running container, PUT,
 * DELETE) and the container logs answer 403 READ_ONLY_SOCKET, the container
 * keeps running, and the admin socket will not even accept its connection.
 */
import { chmodSync, rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultReadOnlySocket } from '../../agent/model/sockets.js';
import { SpcdProcess, sandbox, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { createUser, curlAs, ensureGroup, removeGroup, removeUser, type TestUser } from '../support/users.js';
import { waitFor } from '../support/wait.js';

const ADMIN_GROUP = 'spcd-sec-admin';
const READ_GROUP = 'spcd-sec-read';
const READER = 'spcd-sec-reader';

const sb: Sandbox = sandbox('sec-ro');
const n = (s: string): string => `${sb.instance}-${s}`;
const readOnlySocket = defaultReadOnlySocket(sb.socket);
let spcd: SpcdProcess | undefined;
let reader: TestUser;

beforeAll(async () => {
  ensureGroup(ADMIN_GROUP);
  ensureGroup(READ_GROUP);
  reader = createUser(READER, [READ_GROUP]);
  chmodSync(sb.root, 0o755); // traversable: the gates under test are the sockets' own directories and modes
  writeSet(
    sb,
    'ro.yaml',
    `set: ro\ncontainers:\n  ${n('web')}:\n    image: spcd-demo/service:1\n    command: [demo-service, sleep]\n    network: none\n    stop_grace_period: 1s\n`,
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

describe('the read-only socket', () => {
  it('lets a read-only group member read, refuses its writes with READ_ONLY_SOCKET, and keeps it off the admin socket', async () => {
    const startedAt = (await inspect(n('web')))?.State.StartedAt;
    expect(startedAt).toBeTruthy();
    const status = await curlAs(reader, readOnlySocket, 'GET', '/v1/status');
    expect(status.stderr).toBe('');
    expect(status.status).toBe(200);
    expect(JSON.stringify(JSON.parse(status.body))).toContain(n('web'));
    expect((await curlAs(reader, readOnlySocket, 'GET', `/v1/containers/${n('web')}/health`)).status).toBe(
      200,
    );
    const metrics = await curlAs(reader, readOnlySocket, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('spcd_');

    const stop = await curlAs(reader, readOnlySocket, 'POST', `/v1/containers/${n('web')}/stop`, {
      body: '{}',
    });
    expect(stop.status).toBe(403);
    expect(JSON.parse(stop.body)).toMatchObject({ code: 'READ_ONLY_SOCKET' });
    for (const method of ['PUT', 'DELETE']) {
      const r = await curlAs(reader, readOnlySocket, method, `/v1/containers/${n('web')}`);
      expect(r.status, method).toBe(403);
      expect(JSON.parse(r.body), method).toMatchObject({ code: 'READ_ONLY_SOCKET' });
    }
    const logs = await curlAs(reader, readOnlySocket, 'GET', `/v1/containers/${n('web')}/logs?tail=10`);
    expect(logs.status).toBe(403);
    expect(JSON.parse(logs.body)).toMatchObject({ code: 'READ_ONLY_SOCKET' });

    // the refused stop is audited as coming in on the read-only socket
    await waitFor('the refusal audited', () =>
      spcd?.output.some(
        (l) =>
          l.includes('"audit":true') && l.includes('"socket":"read-only"') && l.includes('READ_ONLY_SOCKET'),
      ),
    );
    // the kernel refuses the admin socket to the reader: no HTTP exchange at all
    const admin = await curlAs(reader, sb.socket, 'POST', `/v1/containers/${n('web')}/stop`, { body: '{}' });
    expect(admin.status).toBe(0);
    expect(admin.curlExit).not.toBe(0);
    expect(admin.stderr).toMatch(/Couldn't connect|Permission denied|Failed to connect/i);

    // nothing was stopped, not even for a moment
    const web = await inspect(n('web'));
    expect(web?.State.Running).toBe(true);
    expect(web?.State.StartedAt).toBe(startedAt);
  });
});
