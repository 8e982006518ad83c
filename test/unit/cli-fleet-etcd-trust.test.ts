import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INSECURE_WARNING } from '../../agent/cli/fleet-etcd.js';
import { runSpcctl } from '../support/cli-run.js';

/**
 * `spcctl fleet status --etcd-*` trusts etcd as spcd does: the CA, client
 * certificate, key and password file are checked as spcd checks them before
 * it connects (trusted paths: the key and the password file are secrets),
 * and a refusal exits 2 naming the flag and the file, before any connection;
 * --etcd-insecure is warned about on stderr as spcd warns in its log. The
 * owner may be root or the user running spcctl. A loopback listener counts
 * the connections spcctl makes.
 */
let dir: string;
let listener: Server;
let port = 0;
let connections = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'spcctl-etcd-trust-'));
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
      .concat(['-subj', '/CN=spcctl-test', '-days', '1'])
      .concat(['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')]),
    { stdio: 'ignore' },
  );
  // accepts and hangs up at once: a member that is there but is no etcd
  listener = createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  port = (listener.address() as { port: number }).port;
});

afterAll(async () => {
  await new Promise((r) => listener.close(r));
  rmSync(dir, { recursive: true, force: true });
});

/** A copy of the test certificate or key, with this mode, in `sub` (made 0700 unless it exists). */
function pem(name: string, from: 'cert' | 'key', mode: number, sub = 'ok'): string {
  mkdirSync(join(dir, sub), { recursive: true, mode: 0o700 });
  const path = join(dir, sub, name);
  execFileSync('cp', [join(dir, `${from}.pem`), path]);
  chmodSync(path, mode);
  return path;
}

/** A fleet status over TLS with these files; the counts of connections made before and after. */
async function status(files: { ca: string; cert?: string; key?: string; user?: string; pw?: string }) {
  const before = connections;
  const args = ['fleet', 'status', '--etcd-endpoints', `https://127.0.0.1:${port}`, '--etcd-ca', files.ca];
  if (files.cert) args.push('--etcd-cert', files.cert);
  if (files.key) args.push('--etcd-key', files.key);
  if (files.user) args.push('--etcd-user', files.user);
  if (files.pw) args.push('--etcd-password-file', files.pw);
  const r = await runSpcctl(args);
  return { ...r, connected: connections - before };
}

const good = () => ({
  ca: pem('ca.pem', 'cert', 0o644),
  cert: pem('cert.pem', 'cert', 0o644),
  key: pem('key.pem', 'key', 0o600),
});

describe('spcctl fleet status checks the etcd files as spcd does', () => {
  it('refuses a client key others may read, exit 2 naming the flag and the file, before connecting', async () => {
    const key = pem('open-key.pem', 'key', 0o644);
    const r = await status({ ...good(), key });
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `spcctl: --etcd-key file ${key} has mode 0644: it must be readable and writable by its owner only (chmod 0600); spcctl will not use it (SECRETS_INSECURE)\n`,
    );
    expect(r.out).toBe('');
    expect(r.connected).toBe(0);
  });

  it('refuses a password file its group may read', async () => {
    const pw = join(dir, 'ok', 'password');
    writeFileSync(pw, 'secret\n', { mode: 0o640 });
    chmodSync(pw, 0o640);
    const r = await status({ ca: good().ca, user: 'spcd-reader', pw });
    expect(r.code).toBe(2);
    expect(r.err).toMatch(
      /^spcctl: --etcd-password-file .*password has mode 0640: .*\(SECRETS_INSECURE\)\n$/,
    );
    expect(r.connected).toBe(0);
  });

  it('refuses a CA others may write, or one owned by another user', async () => {
    const writable = pem('ca-gw.pem', 'cert', 0o664);
    const gw = await status({ ...good(), ca: writable });
    expect(gw.code).toBe(2);
    expect(gw.err).toBe(
      `spcctl: --etcd-ca file ${writable} is writable by its group or by others (mode 0664); spcctl will not use it (UNTRUSTED_PATH)\n`,
    );
    const theirs = pem('ca-nobody.pem', 'cert', 0o644);
    chownSync(theirs, 65534, 65534);
    const other = await status({ ...good(), ca: theirs });
    expect(other.code).toBe(2);
    expect(other.err).toMatch(/^spcctl: --etcd-ca file .*ca-nobody\.pem is owned by uid 65534, not root;/);
    expect(gw.connected + other.connected).toBe(0);
  });

  it('refuses a certificate in a folder others may write (not sticky), naming the folder', async () => {
    const cert = pem('cert.pem', 'cert', 0o644, 'open');
    chmodSync(join(dir, 'open'), 0o777);
    const r = await status({ ...good(), cert });
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `spcctl: --etcd-cert file ${cert}: ${join(dir, 'open')} is a folder above it writable by its group or by others (mode 0777); spcctl will not use it (UNTRUSTED_PATH)\n`,
    );
  });

  it('checks where a link leads, and says which file is missing', async () => {
    const link = join(dir, 'ok', 'key-link.pem');
    symlinkSync(pem('linked-key.pem', 'key', 0o644), link);
    const r = await status({ ...good(), key: link });
    expect(r.code).toBe(2);
    expect(r.err).toContain(
      `spcctl: --etcd-key file ${link}: ${join(dir, 'ok', 'linked-key.pem')} has mode 0644`,
    );
    const missing = await status({ ...good(), ca: join(dir, 'none.pem') });
    expect(missing.code).toBe(2);
    expect(missing.err).toBe(
      `spcctl: --etcd-ca file ${join(dir, 'none.pem')}: cannot read it: ENOENT (SPEC_IO)\n`,
    );
  });

  it('with trusted files, connects: exit 3 from a member that is no etcd', async () => {
    const r = await status(good());
    expect(r.connected).toBeGreaterThan(0);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/^spcctl: etcd does not answer at https:\/\/127\.0\.0\.1:\d+ \(ETCD_UNAVAILABLE\)/);
  }, 30_000);
});

describe('spcctl fleet status --etcd-insecure', () => {
  it('warns on stderr that the fleet is read in plaintext, as spcd warns in its log', async () => {
    const r = await runSpcctl([
      'fleet',
      'status',
      '--etcd-endpoints',
      `http://127.0.0.1:${port}`,
      '--etcd-insecure',
    ]);
    expect(r.err.split('\n')[0]).toBe(`spcctl: ${INSECURE_WARNING}`);
    expect(r.code).toBe(3);
  }, 30_000);
});
