import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { startKube, type KubeIntegrationDeps } from '../../agent/kube/integration.js';
import { runSpcctl } from '../support/cli-run.js';
import { FakeClock } from '../support/fake-clock.js';
import { FakeKubeServer } from '../support/kube-server.js';
import { logLines } from '../support/log-lines.js';
import { waitFor } from '../support/wait.js';

/**
 * A kubeconfig whose cluster is reached over plain http://, or with
 * `insecure-skip-tls-verify: true`, hands the token and the API server's
 * answers (which choose the images rolled out) to anyone on the path. spcd
 * (its Kubernetes integration) and `spcctl fleet status` both refuse it
 * before sending anything, naming the file, the context and the cluster,
 * unless --kube-insecure (or SPCD_KUBE_INSECURE) allows it, and then say so
 * once. A loopback listener counts the connections made to a refused server;
 * in-test API servers (http://, and https:// with a test CA) serve the
 * allowed ones. The file itself holds the token and names the server: one
 * that others may read or write is refused as a secret would be.
 */
const NS = 'spcd-system';
let dir: string;
let listener: Server;
let connections = 0;
let deadUrl = '';
const plain = new FakeKubeServer();
const tls = new FakeKubeServer();
let caFile = '';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'spcd-kubeconfig-trust-'));
  listener = createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  deadUrl = `127.0.0.1:${(listener.address() as { port: number }).port}`;
  caFile = join(dir, 'ca.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1']
      .concat(['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'])
      .concat(['-keyout', join(dir, 'key.pem'), '-out', caFile]),
    { stdio: 'ignore' },
  );
  await plain.start();
  await tls.start(0, { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(caFile, 'utf8') });
  for (const s of [plain, tls])
    s.put('nodes', null, { metadata: { name: 'compute-1' }, status: { conditions: [] } });
});

afterAll(async () => {
  await new Promise((r) => listener.close(r));
  await plain.stop();
  await tls.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A kubeconfig file: context `ops` on cluster `prod` at `server`, with these cluster fields. */
function kubeconfig(name: string, server: string, cluster: string): string {
  const path = join(dir, name);
  writeFileSync(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters:\n- name: prod\n  cluster:\n    server: ${server}\n${cluster}`,
      'users:\n- name: spcd\n  user:\n    token: secret-token',
      `contexts:\n- name: ops\n  context:\n    cluster: prod\n    user: spcd\n    namespace: ${NS}`,
      'current-context: ops',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return path;
}
const SKIP = '    insecure-skip-tls-verify: true';
// client-node itself takes an http:// server only with insecure-skip-tls-verify: the plaintext kubeconfig that works

/** spcctl fleet status with this kubeconfig; the connections the refused server saw. */
async function spcctl(file: string, extra: string[] = [], env: NodeJS.ProcessEnv = {}) {
  const before = connections;
  const r = await runSpcctl(['fleet', 'status', '--kubeconfig', file, ...extra], {
    SPCD_SOCKET: '/nonexistent/spcd.sock',
    ...env,
  });
  return { ...r, connected: connections - before };
}

describe('spcctl fleet status refuses an insecure kubeconfig', () => {
  it('refuses insecure-skip-tls-verify, exit 2 naming the file, context and cluster, before connecting', async () => {
    const file = kubeconfig('skip', `https://${deadUrl}`, SKIP);
    const r = await spcctl(file);
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `spcctl: kubeconfig ${file}, context "ops", cluster "prod": it sets insecure-skip-tls-verify: true: the API server's certificate is not checked, so anyone on the path can answer as the API server and read the token; spcctl will not use it. Give the cluster an https:// server and its certificate-authority (or certificate-authority-data), or pass --kube-insecure to allow it (tests on loopback only) (KUBECONFIG_INSECURE)\n`,
    );
    expect(r.out).toBe('');
    expect(r.connected).toBe(0);
  });

  it('refuses a plain http:// server, and the same found through $KUBECONFIG', async () => {
    const file = kubeconfig('plain', `http://${deadUrl}`, SKIP);
    const r = await spcctl(file);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(
      new RegExp(
        `^spcctl: kubeconfig ${file}, context "ops", cluster "prod": its server http://${deadUrl} is plain http://`,
      ),
    );
    const viaEnv = await runSpcctl(['fleet', 'status'], { SPCD_SOCKET: '/x', KUBECONFIG: file });
    expect(viaEnv.code).toBe(2);
    expect(viaEnv.err).toContain(`kubeconfig ${file}, context "ops", cluster "prod"`);
    expect(connections).toBe(0);
  });

  it('reads with --kube-insecure or SPCD_KUBE_INSECURE, saying so once on stderr', async () => {
    const skip = kubeconfig('tls-skip', tls.url, SKIP);
    const r = await spcctl(skip, ['--kube-insecure']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('nothing is being rolled out');
    expect(r.err).toBe(
      `spcctl: warning: --kube-insecure: kubeconfig ${skip}, context "ops", cluster "prod": it sets insecure-skip-tls-verify: true: the API server's certificate is not checked, so anyone on the path can answer as the API server and read the token\n`,
    );
    const http = kubeconfig('http-env', plain.url, SKIP);
    const e = await spcctl(http, [], { SPCD_KUBE_INSECURE: 'true' });
    expect(e.code).toBe(0);
    expect(e.err.split('\n').filter(Boolean)).toHaveLength(1);
    expect(e.err).toMatch(/^spcctl: warning: --kube-insecure: .*is plain http:\/\//);
  });

  it('refuses a kubeconfig others may read or write: its token, and whom spcctl believes', async () => {
    const file = kubeconfig('readable', `https://${deadUrl}`, `    certificate-authority: ${caFile}`);
    chmodSync(file, 0o644);
    const r = await spcctl(file);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(
      new RegExp(
        `^spcctl: kubeconfig ${file} has mode 0644: it must be readable and writable by its owner only \\(chmod 0600\\)`,
      ),
    );
    expect(r.err).toMatch(/\(SECRETS_INSECURE\)\n$/);
    expect(r.connected).toBe(0);
  });

  it('reads an https:// cluster whose certificate it checks, without a word', async () => {
    const good = kubeconfig('tls-ca', tls.url, `    certificate-authority: ${caFile}`);
    const r = await spcctl(good);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
  });
});

/** spcd's Kubernetes integration (no desired ConfigMap: reporting only), its log kept. */
function kubeDeps(kubeconfigFile: string, insecure: boolean) {
  const { lines, sink } = logLines();
  const deps: KubeIntegrationDeps = {
    kubeconfig: kubeconfigFile,
    insecure,
    nodeName: 'compute-1',
    namespace: NS,
    desiredConfigMap: undefined,
    fleetSlots: 1,
    leaseDurationSeconds: 60,
    sets: () => [],
    engineAvailable: () => true,
    subscribe: () => () => undefined,
    rollout: {} as KubeIntegrationDeps['rollout'], // no rollout without a desired ConfigMap
    clock: new FakeClock(),
    log: pino({ level: 'info' }, sink),
  };
  return { deps, lines };
}

describe("spcd's Kubernetes integration refuses an insecure kubeconfig", () => {
  it('does not start (KUBECONFIG_INSECURE naming the file, context and cluster) and sends nothing', async () => {
    for (const [name, server, cluster] of [
      ['d-skip', `https://${deadUrl}`, SKIP],
      ['d-plain', `http://${deadUrl}`, SKIP],
    ] as const) {
      const file = kubeconfig(name, server, cluster);
      const { deps } = kubeDeps(file, false);
      const err = await startKube(deps).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SpcdError);
      expect((err as SpcdError).code).toBe('KUBECONFIG_INSECURE');
      expect((err as SpcdError).message).toMatch(
        new RegExp(`^kubeconfig ${file}, context "ops", cluster "prod": .*; spcd will not use it`),
      );
      expect((err as SpcdError).details).toMatchObject({
        kubeconfig: file,
        context: 'ops',
        cluster: 'prod',
        server,
      });
    }
    expect(connections).toBe(0);
  });

  it('does not start from a kubeconfig another user could rewrite (SECRETS_INSECURE), and sends nothing', async () => {
    const file = kubeconfig('d-writable', `https://${deadUrl}`, `    certificate-authority: ${caFile}`);
    chmodSync(file, 0o666);
    const err = await startKube(kubeDeps(file, false).deps).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as SpcdError).code).toBe('SECRETS_INSECURE');
    expect((err as SpcdError).message).toContain(`kubeconfig ${file} has mode 0666`);
    expect(connections).toBe(0);
  });

  it('starts with --kube-insecure, with one warning in its log', async () => {
    const file = kubeconfig('d-allowed', plain.url, SKIP);
    const { deps, lines } = kubeDeps(file, true);
    const before = plain.calls.length;
    const kube = await startKube(deps);
    try {
      await waitFor('the node report', () => plain.calls.length > before);
      const warned = lines.filter((l) => l.code === 'KUBECONFIG_INSECURE');
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({ level: 40, kubeconfig: file });
      expect(warned[0]!.msg).toMatch(
        /^--kube-insecure: kubeconfig .*, context "ops", cluster "prod": its server http:/,
      );
    } finally {
      await kube.stop();
    }
  });
});
