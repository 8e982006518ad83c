import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * Credentials spcd reads as root are secrets like the secrets file: a
 * registry credentials file or an etcd client key that every local user may
 * read (mode 0644) must be refused, not used. A real spcd each time; the
 * etcd key is refused before spcd connects, so no etcd member is needed.
 */
let spcd: SpcdProcess | undefined;
let sb: Sandbox | undefined;

afterEach(async () => {
  await spcd?.stop();
  spcd = undefined;
  if (sb) await cleanupInstance(sb.instance);
});

describe('credential files are trusted paths', () => {
  it('a registry credentials file readable by all is refused at the pull', async () => {
    sb = sandbox('sec-regauth');
    const auth = join(sb.root, 'registry.json');
    const basic = Buffer.from('robot:hunter2-registry').toString('base64');
    writeFileSync(auth, JSON.stringify({ auths: { '127.0.0.1:5999': { auth: basic } } }), { mode: 0o644 });
    // An image that is not here: spcd pulls it, with the credentials for its registry.
    writeSet(
      sb,
      'r.yaml',
      `set: r\ncontainers:\n  ${sb.instance}-r:\n    image: 127.0.0.1:5999/spcd-sec/none:1\n    network: none\n`,
    );
    spcd = SpcdProcess.start(sb, ['--registry-auth', auth]);
    await spcd.ready();
    const p = spcd;
    const line = await waitFor(
      'the pull refused',
      () => p.output.find((l) => l.includes('SECRETS_INSECURE')),
      {
        timeoutMs: 30_000,
      },
    );
    expect(line).toContain(
      `registry credentials file ${auth} has mode 0644: it must be readable and writable by its owner only (chmod 0600); spcd will not use it`,
    );
    expect(p.output.join('\n')).not.toContain('hunter2-registry');
  });

  it('an etcd client key readable by all keeps the fleet integration off', async () => {
    sb = sandbox('sec-etcdkey');
    const [ca, cert, key] = ['ca.pem', 'cert.pem', 'key.pem'].map((f) => join(sb!.root, f)) as [
      string,
      string,
      string,
    ];
    execFileSync('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      '/CN=spcd-sec',
      '-days',
      '1',
      '-keyout',
      key,
      '-out',
      cert,
    ]);
    execFileSync('cp', [cert, ca]);
    execFileSync('chmod', ['0644', key]);
    writeSet(
      sb,
      's.yaml',
      `set: s\ncontainers:\n  ${sb.instance}-s:\n    image: spcd-demo/service:1\n    command: [demo-service, sleep]\n    network: none\n    stop_grace_period: 1s\n`,
    );
    spcd = SpcdProcess.start(sb, [
      // The check comes before any connection: no member needs to answer (none listens here).
      '--etcd-endpoints',
      'https://127.0.0.1:1',
      '--etcd-ca',
      ca,
      '--etcd-cert',
      cert,
      '--etcd-key',
      key,
      '--node-name',
      'compute-sec',
    ]);
    await spcd.ready();
    const p = spcd;
    const line = await waitFor(
      'the etcd integration off',
      () =>
        p.output.find(
          (l) => l.includes('etcd integration did not start') || l.includes('etcd fleet integration started'),
        ),
      { timeoutMs: 30_000 },
    );
    expect(line).toContain(
      `--etcd-key file ${key} has mode 0644: it must be readable and writable by its owner only (chmod 0600); spcd will not use it`,
    );
  });
});
