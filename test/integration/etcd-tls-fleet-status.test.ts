import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectEtcd } from '../../agent/etcd/client.js';
import { runSpcctl } from '../support/cli-run.js';
import { TestCa, TlsEtcd, type CertFiles } from '../support/etcd-tls.js';

/**
 * `spcctl fleet status` against a real etcd that serves clients over TLS and
 * requires client certificates (docs/explanation/security.md, "etcd"): it
 * reads with the CA that signed the member and a client certificate that
 * member trusts, and reads nothing from a member its --etcd-ca did not sign,
 * a member whose certificate names another host, or a member that does not
 * trust its client certificate (exit 3, ETCD_UNAVAILABLE). The same client
 * (agent/etcd/client.ts) and the same flags as spcd.
 */
const PREFIX = '/tls-status/';
let dir: string;
let ca: TestCa;
let rogue: TestCa;
let client: CertFiles;
let etcd: TlsEtcd;
let misnamed: TlsEtcd;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'spcd-etcd-pki-'));
  ca = new TestCa(dir, 'fleet');
  rogue = new TestCa(dir, 'rogue');
  client = ca.issue('spcd-reader');
  etcd = await TlsEtcd.start(ca.issue('member', ['IP:127.0.0.1']), ca.cert);
  misnamed = await TlsEtcd.start(ca.issue('elsewhere', ['DNS:etcd.elsewhere.invalid']), ca.cert);
  const writer = connectEtcd({ endpoints: [etcd.endpoint], caFile: ca.cert, ...certOf(client) });
  try {
    await writer.put(`${PREFIX}desired`).value('images: { svc: "img:2" }\nrollout: { id: r-tls }\n');
  } finally {
    writer.close();
  }
}, 60_000);

afterAll(async () => {
  await etcd?.stop();
  await misnamed?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const certOf = (c: CertFiles) => ({ certFile: c.cert, keyFile: c.key });

function status(endpoint: string, caFile: string, c: CertFiles) {
  return runSpcctl(
    ['fleet', 'status', '--etcd-endpoints', endpoint, '--etcd-prefix', PREFIX].concat([
      '--etcd-ca',
      caFile,
      '--etcd-cert',
      c.cert,
      '--etcd-key',
      c.key,
    ]),
  );
}

describe('spcctl fleet status over TLS to a real etcd', { timeout: 60_000 }, () => {
  it('reads the fleet with the CA that signed the member and a client certificate it trusts', async () => {
    const r = await status(etcd.endpoint, ca.cert, client);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out.split('\n')[0]).toBe('rollout r-tls  rolling  N=node default');
  });

  it('reads nothing from a member another CA signed, as far as --etcd-ca says', async () => {
    const r = await status(etcd.endpoint, rogue.cert, client);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/^spcctl: etcd does not answer at https:\/\/127\.0\.0\.1:\d+ \(ETCD_UNAVAILABLE\)/);
    expect(r.err).toContain('unable to verify the first certificate');
    expect(r.err).toContain(`The TLS handshake failed: check --etcd-ca ${rogue.cert}`);
    expect(r.out).toBe('');
  });

  it('reads nothing from a member whose certificate names another host', async () => {
    const r = await status(misnamed.endpoint, ca.cert, client);
    expect(r.code).toBe(3);
    expect(r.err).toContain('(ETCD_UNAVAILABLE)');
    expect(r.err).toContain('ERR_TLS_CERT_ALTNAME_INVALID');
    expect(r.out).toBe('');
  });

  it('is refused by a member that does not trust its client certificate', async () => {
    const intruder = rogue.issue('intruder');
    const r = await status(etcd.endpoint, ca.cert, intruder);
    expect(r.code).toBe(3);
    expect(r.err).toContain('(ETCD_UNAVAILABLE)');
    expect(r.err).toMatch(/bad certificate|certificate required/);
    expect(r.err).toContain(`--etcd-cert ${intruder.cert} (signed by a CA the members trust)`);
    expect(r.out).toBe('');
  });
});
