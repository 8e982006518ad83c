import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { parseSettings, type Settings } from '../../agent/daemon/settings.js';
import { parseEtcdDesired } from '../../agent/etcd/desired.js';

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}): Settings => parseSettings(argv, env) as Settings;

function refusal(argv: string[], env: NodeJS.ProcessEnv = {}): SpcdError {
  try {
    parse(argv, env);
  } catch (err) {
    return err as SpcdError;
  }
  throw new Error(`accepted ${argv.join(' ')}`);
}

describe('etcd daemon settings', () => {
  it('is off without --etcd-endpoints', () => {
    expect(parse([]).etcd).toBeUndefined();
  });

  it('takes the members, the default prefix, --fleet-slots, and the hostname as the node name', () => {
    const s = parse([
      '--etcd-endpoints',
      'http://10.0.0.1:2379, http://10.0.0.2:2379/',
      '--etcd-insecure',
      '--fleet-slots',
      '5',
    ]);
    expect(s.etcd).toEqual({
      endpoints: ['http://10.0.0.1:2379', 'http://10.0.0.2:2379'],
      prefix: '/spcd/',
      caFile: undefined,
      certFile: undefined,
      keyFile: undefined,
      user: undefined,
      passwordFile: undefined,
      insecure: true,
      fleetSlots: 5,
    });
    expect(s.nodeName).toBe(hostname());
    expect(s.kube).toBeUndefined();
  });

  it('takes an etcd user and its password file with https://', () => {
    const s = parse([
      '--etcd-endpoints',
      'https://e1:2379',
      '--etcd-ca',
      '/pki/ca.pem',
      '--etcd-user',
      'node-compute-7',
      '--etcd-password-file',
      '/etc/spcd/etcd-password',
    ]);
    expect(s.etcd).toMatchObject({
      user: 'node-compute-7',
      passwordFile: '/etc/spcd/etcd-password',
      certFile: undefined,
      insecure: false,
    });
  });

  it('takes TLS files (resolved) from flags or the environment', () => {
    const s = parse(
      ['--etcd-endpoints', 'https://e1:2379', '--node-name', 'compute-7', '--etcd-prefix', '/site-a/spcd/'],
      {
        SPCD_ETCD_CA: '/pki/ca.pem',
        SPCD_ETCD_CERT: '/pki/node.pem',
        SPCD_ETCD_KEY: '/pki/node-key.pem',
      },
    );
    expect(s.etcd).toMatchObject({
      prefix: '/site-a/spcd/',
      caFile: '/pki/ca.pem',
      certFile: '/pki/node.pem',
      keyFile: '/pki/node-key.pem',
    });
    expect(s.nodeName).toBe('compute-7');
  });

  it.each([
    [['--etcd-endpoints', 'e1:2379'], 'etcd-endpoints', /--etcd-endpoints: 'e1:2379' must start with http/],
    [['--etcd-endpoints', 'not a url'], 'etcd-endpoints', /is not a URL like https:\/\/10.0.0.1:2379/],
    [['--etcd-endpoints', 'http://e1'], 'etcd-endpoints', /must name a port/],
    [['--etcd-endpoints', 'http://e1:2379/v3'], 'etcd-endpoints', /must be only scheme:\/\/host:port/],
    [['--etcd-endpoints', ' , '], 'etcd-endpoints', /names no endpoint/],
    [['--etcd-endpoints', 'http://e1:2379,https://e2:2379'], 'etcd-endpoints', /mixes http/],
    [['--etcd-endpoints', 'https://e1:2379'], 'etcd-ca', /--etcd-ca: is required with https/],
    [['--etcd-endpoints', 'http://e1:2379', '--etcd-ca', '/ca'], 'etcd-ca', /needs https:\/\/ endpoints/],
    [
      ['--etcd-endpoints', 'https://e1:2379', '--etcd-ca', '/ca', '--etcd-cert', '/c'],
      'etcd-key',
      /both or neither/,
    ],
    [['--etcd-ca', '/ca'], 'etcd-ca', /--etcd-ca: is set but --etcd-endpoints is not/],
    [['--etcd-endpoints', 'http://e1:2379', '--etcd-prefix', 'spcd'], 'etcd-prefix', /must be like \/spcd\//],
    [['--etcd-endpoints', 'http://e1:2379', '--etcd-prefix', '/a b/'], 'etcd-prefix', /must be like/],
    [
      ['--etcd-endpoints', 'http://e1:2379'],
      'etcd-endpoints',
      /'http:\/\/e1:2379' is plaintext: .*--etcd-insecure/,
    ],
    [
      ['--etcd-endpoints', 'https://e1:2379', '--etcd-ca', '/ca'],
      'etcd-endpoints',
      /https:\/\/ needs this node to authenticate: a client certificate .* or an etcd user/,
    ],
    [
      ['--etcd-endpoints', 'https://e1:2379', '--etcd-ca', '/ca', '--etcd-user', 'node-a'],
      'etcd-password-file',
      /both or neither/,
    ],
    [
      [
        '--etcd-endpoints',
        'https://e1:2379',
        '--etcd-ca',
        '/ca',
        '--etcd-cert',
        '/c',
        '--etcd-key',
        '/k',
        '--etcd-insecure',
      ],
      'etcd-insecure',
      /is for http:\/\/ endpoints only/,
    ],
    [
      ['--etcd-endpoints', 'http://e1:2379', '--etcd-insecure', '--node-name', 'a/b'],
      'node-name',
      /it names this node's etcd keys/,
    ],
    [['--etcd-insecure'], 'etcd-insecure', /is set but --etcd-endpoints is not/],
  ])('refuses %j naming --%s', (argv, flag, message) => {
    const err = refusal(argv);
    expect(err.code).toBe('SETTINGS_INVALID');
    expect(err.details.flag).toBe(flag);
    expect(err.message).toMatch(message);
  });

  it('refuses etcd together with Kubernetes, by kubeconfig or in a pod', () => {
    const byFile = refusal([
      '--etcd-endpoints',
      'http://e1:2379',
      '--etcd-insecure',
      '--kubeconfig',
      '/k',
      '--node-name',
      'n',
    ]);
    expect(byFile.details.flag).toBe('etcd-endpoints');
    expect(byFile.message).toMatch(/cannot be used with --kubeconfig/);
    const inPod = refusal(['--etcd-endpoints', 'http://e1:2379', '--etcd-insecure'], {
      KUBERNETES_SERVICE_HOST: '10.96.0.1',
      NODE_NAME: 'n',
    });
    expect(inPod.message).toMatch(/cannot be used with in-cluster Kubernetes/);
  });
});

describe('the desired document in etcd', () => {
  const KEY = '/spcd/desired';

  it('reads images, globals and the rollout object from one YAML value', () => {
    const d = parseEtcdDesired(
      'images:\n  nova_compute: reg/nova:31\nglobals:\n  openstack_release: "2024.2"\nrollout:\n  id: nova-31\n  maxConcurrent: 10\n',
      KEY,
      '42',
    );
    expect(d).toEqual({
      version: '42',
      images: { nova_compute: 'reg/nova:31' },
      globals: { openstack_release: '2024.2' },
      rollout: { id: 'nova-31', maxConcurrent: 10 },
      source: 'etcd key /spcd/desired, field rollout',
    });
  });

  it('takes an empty value as no change, and JSON as well as YAML', () => {
    expect(parseEtcdDesired('', KEY, '1')).toEqual({
      version: '1',
      images: {},
      globals: {},
      rollout: undefined,
      source: 'etcd key /spcd/desired, field rollout',
    });
    expect(parseEtcdDesired('{"images":{"a":"b:1"}}', KEY, '2').images).toEqual({ a: 'b:1' });
  });

  it.each([
    ['- a\n- b\n', /etcd key \/spcd\/desired: must be a map with images, globals and rollout/],
    ['image: {a: b}\n', /etcd key \/spcd\/desired: image is not a part \(known: images, globals, rollout\)/],
    [
      'images: {nova_compute: 3}\n',
      /^etcd key \/spcd\/desired: images: nova_compute must be an image reference string$/,
    ],
    [
      'images: {nova_compute: "Registry.example/Nova:1"}\n',
      /^etcd key \/spcd\/desired: images: nova_compute: 'Registry.example\/Nova:1' is not an image reference: 'Nova' is not a lower-case name component$/,
    ],
    ['images: [a]\n', /^etcd key \/spcd\/desired: images must be a map$/],
    ['images: {a: [\n', /etcd key \/spcd\/desired: /],
    ['globals: [1]\n', /^etcd key \/spcd\/desired: globals/],
  ])('refuses %j naming the key and the part', (text, message) => {
    let err: SpcdError | undefined;
    try {
      parseEtcdDesired(text, KEY, '3');
    } catch (e) {
      err = e as SpcdError;
    }
    expect(err).toBeInstanceOf(SpcdError);
    expect(['SPEC_INVALID', 'SPEC_YAML']).toContain(err!.code);
    expect(err!.message).toMatch(message);
    expect(err!.details.key).toBe(KEY);
  });
});
