/**
 * spcctl run by a member of the read-only group only (a real user made with
 * useradd, spcctl as a real process under its uid, a real spcd): its reads
 * go to the read-only socket when the admin socket refuses it, its writes
 * are refused by the kernel (admin socket) or by spcd (READ_ONLY_SOCKET
 * with --read-only), both exit 3.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/daemon.js';
import { inspect } from '../support/docker.js';
import { startReaderDaemon, type ReaderDaemon } from '../support/reader-daemon.js';
import { runAs } from '../support/users.js';

let d: ReaderDaemon;

const spcctl = (args: string[]): ReturnType<typeof runAs> =>
  runAs(d.reader, [process.execPath, join(REPO, 'bin', 'spcctl.js'), '--socket', d.sb.socket, ...args]);

beforeAll(async () => {
  d = await startReaderDaemon('spcd-rocli');
});
afterAll(() => d?.close());

describe('spcctl for the read-only group', () => {
  it('reads through the read-only socket when the admin socket refuses it', async () => {
    const status = await spcctl(['status']);
    expect(status.stderr).toBe('');
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(d.web);
    const json = await spcctl(['--read-only', '-o', 'json', 'status']);
    expect(json.code).toBe(0);
    expect(JSON.stringify(JSON.parse(json.stdout))).toContain(d.web);
  });

  it('cannot write: the admin socket refuses the connection, the read-only socket the request', async () => {
    const viaAdmin = await spcctl(['stop', d.web]);
    expect(viaAdmin.code).toBe(3);
    expect(viaAdmin.stderr).toContain(`permission denied on ${d.sb.socket}`);
    const viaReadOnly = await spcctl(['--read-only', 'stop', d.web]);
    expect(viaReadOnly.code).toBe(3);
    expect(viaReadOnly.stderr).toContain('READ_ONLY_SOCKET');
    const logs = await spcctl(['logs', d.web]);
    expect(logs.code).toBe(3);
    expect(logs.stderr).toContain('READ_ONLY_SOCKET');
    expect((await inspect(d.web))?.State.Running).toBe(true);
  });
});
