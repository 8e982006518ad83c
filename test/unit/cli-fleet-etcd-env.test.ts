import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../agent/cli/args.js';
import { etcdSettingsOf, INSECURE_WARNING, wantsEtcd } from '../../agent/cli/fleet-etcd.js';
import { ETCD_FLAGS } from '../../agent/model/flags.js';
import { runSpcctl } from '../support/cli-run.js';
import { freePort } from '../support/etcd-cluster.js';

/**
 * `spcctl fleet status` reads spcd's etcd variables (SPCD_ETCD_ENDPOINTS and
 * the rest, from spcd's own table) as spcd does: the variables alone give the
 * settings the flags give, a flag wins over its variable, and a bad variable
 * is refused naming its flag.
 */
type EtcdFlag = keyof typeof ETCD_FLAGS;
/** The variables that say what these flags say. */
const asEnv = (flags: Partial<Record<EtcdFlag, string>>): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(flags).map(([k, v]) => [ETCD_FLAGS[k as EtcdFlag].env, v]));
const NO_SPCD = { SPCD_SOCKET: '/nonexistent/spcd.sock' };

/** A loopback port nobody listens on. */
const closedPort = freePort;

describe("spcctl fleet status reads spcd's SPCD_ETCD_* variables", () => {
  it('takes every etcd flag of spcd, of the same kind, from the same table', () => {
    const options = COMMANDS.fleet!.options;
    for (const [flag, def] of Object.entries(ETCD_FLAGS))
      expect(options[flag], flag).toEqual({ type: 'boolean' in def ? 'boolean' : 'string' });
  });

  it('gives from the variables alone the settings the flags give (TLS files resolved)', async () => {
    const tls = {
      'etcd-endpoints': 'https://10.0.0.1:2379, https://10.0.0.2:2379',
      'etcd-prefix': '/fleet-a/',
      'etcd-ca': 'pki/ca.pem',
      'etcd-cert': 'pki/node.pem',
      'etcd-key': 'pki/node-key.pem',
    };
    const fromEnv = await etcdSettingsOf({}, asEnv(tls));
    expect(fromEnv).toEqual(await etcdSettingsOf(tls, {}));
    expect(fromEnv).toMatchObject({
      endpoints: ['https://10.0.0.1:2379', 'https://10.0.0.2:2379'],
      prefix: '/fleet-a/',
      caFile: resolve('pki/ca.pem'),
      keyFile: resolve('pki/node-key.pem'),
      insecure: false,
    });
    const user = {
      'etcd-endpoints': 'https://10.0.0.1:2379',
      'etcd-ca': '/etc/spcd/etcd-ca.pem',
      'etcd-user': 'spcd-node-compute-7',
      'etcd-password-file': '/etc/spcd/etcd-password',
    };
    expect(await etcdSettingsOf({}, asEnv(user))).toEqual(await etcdSettingsOf(user, {}));
    const plain = { 'etcd-endpoints': 'http://127.0.0.1:2379' };
    const insecure = await etcdSettingsOf({}, { ...asEnv(plain), SPCD_ETCD_INSECURE: 'yes' });
    expect(insecure).toEqual(await etcdSettingsOf({ ...plain, 'etcd-insecure': true }, {}));
    expect(insecure.insecure).toBe(true);
  });

  it('lets a flag win over its variable', async () => {
    const env = asEnv({
      'etcd-endpoints': 'http://10.9.9.9:2379',
      'etcd-prefix': '/from-env/',
      'etcd-insecure': 'true',
    });
    const s = await etcdSettingsOf(
      { 'etcd-endpoints': 'http://10.0.0.1:2379', 'etcd-prefix': '/from-flag/' },
      env,
    );
    expect(s.endpoints).toEqual(['http://10.0.0.1:2379']);
    expect(s.prefix).toBe('/from-flag/');
    // the variable still counts where no flag is given
    expect(s.insecure).toBe(true);
  });

  it('reads etcd when a variable names it, unless a flag names Kubernetes; an empty variable is unset', () => {
    const env = asEnv({ 'etcd-endpoints': 'https://10.0.0.1:2379' });
    expect(wantsEtcd({}, {})).toBe(false);
    expect(wantsEtcd({}, env)).toBe(true);
    expect(wantsEtcd({}, { SPCD_ETCD_ENDPOINTS: '' })).toBe(false);
    expect(wantsEtcd({ kubeconfig: '/root/.kube/config' }, env)).toBe(false);
    expect(wantsEtcd({ namespace: 'spcd-system' }, env)).toBe(false);
    expect(wantsEtcd({ 'etcd-insecure': true }, {})).toBe(true);
  });

  it('runs with the variables alone as with the flags: the same exit, output and warning', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const byFlags = await runSpcctl(['fleet', 'status', '--etcd-endpoints', url, '--etcd-insecure'], NO_SPCD);
    const byEnv = await runSpcctl(['fleet', 'status'], {
      ...NO_SPCD,
      ...asEnv({ 'etcd-endpoints': url, 'etcd-insecure': 'true' }),
    });
    expect(byEnv).toEqual(byFlags);
    expect(byEnv.code).toBe(3);
    expect(byEnv.err).toContain(`spcctl: ${INSECURE_WARNING}\n`);
    expect(byEnv.err).toContain(`spcctl: etcd does not answer at ${url} (ETCD_UNAVAILABLE)`);
  });

  it('answers the flag given, not the variable', async () => {
    const flag = `http://127.0.0.1:${await closedPort()}`;
    const env = {
      ...NO_SPCD,
      ...asEnv({ 'etcd-endpoints': 'http://10.255.255.1:2379', 'etcd-insecure': '1' }),
    };
    const r = await runSpcctl(['fleet', 'status', '--etcd-endpoints', flag], env);
    expect(r.code).toBe(3);
    expect(r.err).toContain(`etcd does not answer at ${flag} (ETCD_UNAVAILABLE)`);
    expect(r.err).not.toContain('10.255.255.1');
  });

  it.each([
    [
      { 'etcd-endpoints': 'http://127.0.0.1:1' },
      /^spcctl: --etcd-endpoints: 'http:\/\/127\.0\.0\.1:1' is plaintext/,
    ],
    [
      { 'etcd-endpoints': 'http://127.0.0.1:1', 'etcd-insecure': 'maybe' },
      /^spcctl: --etcd-insecure: 'maybe' is not true or false/,
    ],
    [{ 'etcd-ca': '/etc/spcd/ca.pem' }, /^spcctl: --etcd-ca is set but --etcd-endpoints is not/],
    [{ 'etcd-endpoints': 'https://127.0.0.1:1' }, /^spcctl: --etcd-ca: is required with https/],
  ])('refuses the variables %j naming the flag, exit 2, before connecting', async (vars, message) => {
    const r = await runSpcctl(['fleet', 'status'], { ...NO_SPCD, ...asEnv(vars) });
    expect(r.err).toMatch(message);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
  });

  it('reads Kubernetes when --kubeconfig is given beside SPCD_ETCD_ENDPOINTS', async () => {
    const env = { ...NO_SPCD, ...asEnv({ 'etcd-endpoints': 'http://127.0.0.1:1', 'etcd-insecure': 'true' }) };
    const r = await runSpcctl(['fleet', 'status', '--kubeconfig', '/nonexistent/kubeconfig'], env);
    expect(r.code).toBe(1);
    expect(r.err).toContain('/nonexistent/kubeconfig');
    expect(r.err).not.toMatch(/etcd/i);
  });
});
