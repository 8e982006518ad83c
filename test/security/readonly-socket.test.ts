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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultReadOnlySocket } from '../../agent/model/sockets.js';
import { inspect } from '../support/docker.js';
import { startReaderDaemon, type ReaderDaemon } from '../support/reader-daemon.js';
import { curlAs } from '../support/users.js';
import { waitFor } from '../support/wait.js';

let d: ReaderDaemon;

beforeAll(async () => {
  d = await startReaderDaemon('spcd-secro');
});
afterAll(() => d?.close());

describe('the read-only socket', () => {
  it('lets a read-only group member read, refuses its writes with READ_ONLY_SOCKET, and keeps it off the admin socket', async () => {
    const ro = defaultReadOnlySocket(d.sb.socket);
    const startedAt = (await inspect(d.web))?.State.StartedAt;
    expect(startedAt).toBeTruthy();
    const status = await curlAs(d.reader, ro, 'GET', '/v1/status');
    expect(status.stderr).toBe('');
    expect(status.status).toBe(200);
    expect(JSON.stringify(JSON.parse(status.body))).toContain(d.web);
    expect((await curlAs(d.reader, ro, 'GET', `/v1/containers/${d.web}/health`)).status).toBe(200);
    const metrics = await curlAs(d.reader, ro, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('spcd_');

    const stop = await curlAs(d.reader, ro, 'POST', `/v1/containers/${d.web}/stop`, {
      body: '{}',
    });
    expect(stop.status).toBe(403);
    expect(JSON.parse(stop.body)).toMatchObject({ code: 'READ_ONLY_SOCKET' });
    for (const method of ['PUT', 'DELETE']) {
      const r = await curlAs(d.reader, ro, method, `/v1/containers/${d.web}`);
      expect(r.status, method).toBe(403);
      expect(JSON.parse(r.body), method).toMatchObject({ code: 'READ_ONLY_SOCKET' });
    }
    const logs = await curlAs(d.reader, ro, 'GET', `/v1/containers/${d.web}/logs?tail=10`);
    expect(logs.status).toBe(403);
    expect(JSON.parse(logs.body)).toMatchObject({ code: 'READ_ONLY_SOCKET' });

    // the refused stop is audited as coming in on the read-only socket
    await waitFor('the refusal audited', () =>
      d.spcd.output.some(
        (l) =>
          l.includes('"audit":true') && l.includes('"socket":"read-only"') && l.includes('READ_ONLY_SOCKET'),
      ),
    );
    // the kernel refuses the admin socket to the reader: no HTTP exchange at all
    const admin = await curlAs(d.reader, d.sb.socket, 'POST', `/v1/containers/${d.web}/stop`, { body: '{}' });
    expect(admin.status).toBe(0);
    expect(admin.curlExit).not.toBe(0);
    expect(admin.stderr).toMatch(/Couldn't connect|Permission denied|Failed to connect/i);

    // nothing was stopped, not even for a moment
    const web = await inspect(d.web);
    expect(web?.State.Running).toBe(true);
    expect(web?.State.StartedAt).toBe(startedAt);
  });
});
