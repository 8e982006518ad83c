import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { checkKubeTransport, loadKubeConfig } from '../../agent/kube/kubeconfig.js';

/**
 * Where spcd and spcctl find their kubeconfig, and the check of its current
 * cluster: files only (no network), the refusals by their typed error.
 * The attacks through spcctl and spcd: test/security/kubeconfig-trust.test.ts.
 */
const dir = mkdtempSync(join(tmpdir(), 'spcd-kubeconfig-load-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.unstubAllEnvs());

function config(path: string, context: string, server: string, cluster = ''): string {
  writeFileSync(
    path,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: c-${context}\n  cluster:\n    server: ${server}\n${cluster}` +
      `users:\n- name: u-${context}\n  user:\n    token: t\n` +
      `contexts:\n- name: ${context}\n  context:\n    cluster: c-${context}\n    user: u-${context}\ncurrent-context: ${context}\n`,
  );
  return path;
}

function refusal(f: () => unknown): SpcdError {
  try {
    f();
  } catch (err) {
    if (err instanceof SpcdError) return err;
    throw err;
  }
  throw new Error('not refused');
}

describe('loadKubeConfig', () => {
  it("finds none without a word of client-node's plain http://localhost:8080: SETTINGS_INVALID", () => {
    const home = join(dir, 'empty-home');
    mkdirSync(home);
    const err = refusal(() => loadKubeConfig(undefined, { HOME: home }));
    expect(err.code).toBe('SETTINGS_INVALID');
    expect(err.message).toBe(
      `no kubeconfig: pass --kubeconfig FILE, set KUBECONFIG, or create ${home}/.kube/config`,
    );
  });

  it('takes $KUBECONFIG (files merged, the first current context), else ~/.kube/config', () => {
    const a = config(join(dir, 'a'), 'first', 'https://10.0.0.1:6443');
    const b = config(join(dir, 'b'), 'second', 'https://10.0.0.2:6443');
    const both = loadKubeConfig(undefined, { KUBECONFIG: `${a}:${b}` });
    expect(both.source).toBe(`kubeconfig ${a}:${b}`);
    expect(both.kc.getCurrentContext()).toBe('first');
    expect(both.kc.getContexts().map((c) => c.name)).toEqual(['first', 'second']);
    const home = join(dir, 'home');
    mkdirSync(join(home, '.kube'), { recursive: true });
    config(join(home, '.kube', 'config'), 'homed', 'https://10.0.0.3:6443');
    const homed = loadKubeConfig(undefined, { HOME: home });
    expect(homed.file).toBe(join(home, '.kube', 'config'));
    expect(homed.kc.getCurrentCluster()?.server).toBe('https://10.0.0.3:6443');
    expect(loadKubeConfig(b, { KUBECONFIG: a }).kc.getCurrentContext()).toBe('second');
  });
});

describe('checkKubeTransport', () => {
  it('passes https:// with the certificate checked, saying nothing, with or without --kube-insecure', () => {
    const loaded = loadKubeConfig(config(join(dir, 'ok'), 'ok', 'https://10.0.0.1:6443'), 'in-cluster');
    expect(checkKubeTransport(loaded, false, 'spcd')).toBeUndefined();
    expect(checkKubeTransport(loaded, true, 'spcd')).toBeUndefined();
  });

  it('judges http:// before insecure-skip-tls-verify, and names both in the details', () => {
    const file = config(
      join(dir, 'both'),
      'x',
      'HTTP://10.0.0.1:8080',
      '    insecure-skip-tls-verify: true\n',
    );
    const err = refusal(() => checkKubeTransport(loadKubeConfig(file, 'in-cluster'), false, 'spcctl'));
    expect(err.code).toBe('KUBECONFIG_INSECURE');
    expect(err.message).toMatch(
      /its server HTTP:\/\/10\.0\.0\.1:8080 is plain http:\/\/.*spcctl will not use it/,
    );
    expect(err.details).toEqual({
      kubeconfig: file,
      context: 'x',
      cluster: 'c-x',
      server: 'HTTP://10.0.0.1:8080',
      skipTLSVerify: true,
    });
  });

  it("refuses the pod's own config when its service port makes it plain http://", () => {
    vi.stubEnv('KUBERNETES_SERVICE_HOST', '10.96.0.1');
    vi.stubEnv('KUBERNETES_SERVICE_PORT', '8080');
    const err = refusal(() => checkKubeTransport(loadKubeConfig(undefined, 'in-cluster'), false, 'spcd'));
    expect(err.code).toBe('KUBECONFIG_INSECURE');
    expect(err.message).toMatch(
      /^in-cluster config \(service account\), context "inClusterContext", cluster "inCluster": its server http:\/\/10\.96\.0\.1:8080 is plain/,
    );
    expect(err.details.kubeconfig).toBeNull();
  });

  it('refuses a current context that names no cluster (SETTINGS_INVALID)', () => {
    const file = join(dir, 'nocluster');
    writeFileSync(
      file,
      'apiVersion: v1\nkind: Config\ncontexts:\n- name: lost\n  context:\n    cluster: gone\n    user: u\ncurrent-context: lost\n',
    );
    const err = refusal(() => checkKubeTransport(loadKubeConfig(file, 'in-cluster'), true, 'spcd'));
    expect(err.code).toBe('SETTINGS_INVALID');
    expect(err.message).toBe(`kubeconfig ${file}: its current context "lost" names no cluster`);
  });
});
