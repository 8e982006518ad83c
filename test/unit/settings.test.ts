import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { parseSettings, type Settings } from '../../agent/daemon/settings.js';

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}): Settings => parseSettings(argv, env) as Settings;

describe('daemon settings', () => {
  it('answers --help and --version before reading any other setting', () => {
    expect(parseSettings(['--help'], { SPCD_RELIST_INTERVAL: 'bogus' })).toBe('help');
    expect(parseSettings(['--version'], { SPCD_RELIST_INTERVAL: 'bogus' })).toBe('version');
  });

  it('takes flags over environment over defaults, resolved once', () => {
    const s = parse(['--sets', '/x/sets', '--relist-interval', '2s'], {
      SPCD_SETS: '/env/sets',
      SPCD_STATE_DIR: '/env/state',
    });
    expect(s.setsDir).toBe('/x/sets');
    expect(s.stateDir).toBe('/env/state');
    expect(s.socketPath).toBe('/run/spcd/spcd.sock');
    expect(s.dockerSocket).toBe('/var/run/docker.sock');
    expect(s.relistMs).toBe(2000);
    expect(s.gateDeadlineMs).toBe(120_000);
    expect(s.instance).toBe('spcd');
    expect(s.kube).toBeUndefined();
    expect(s.systemctl).toEqual(['systemctl']);
  });

  it("takes --engine docker, podman or auto, with each engine's socket as the default", () => {
    expect(parse([]).engine).toBeUndefined();
    expect(parse(['--engine', 'docker']).engine).toBe('docker');
    const podman = parse([], { SPCD_ENGINE: 'podman' });
    expect(podman.engine).toBe('podman');
    expect(podman.dockerSocket).toBe('/run/podman/podman.sock');
    expect(parse(['--engine', 'podman', '--docker-socket', '/x/p.sock']).dockerSocket).toBe('/x/p.sock');
    expect(() => parse(['--engine', 'containerd'])).toThrow(
      expect.objectContaining({ code: 'SETTINGS_INVALID', details: { flag: 'engine', value: 'containerd' } }),
    );
  });

  it("splits --systemctl into the command's words", () => {
    expect(parse([], { SPCD_SYSTEMCTL: 'nsenter --target 1  --mount -- systemctl' }).systemctl).toEqual([
      'nsenter',
      '--target',
      '1',
      '--mount',
      '--',
      'systemctl',
    ]);
  });

  it("puts the read-only socket beside the admin socket's directory, or where asked, or nowhere", () => {
    const d = parse([]);
    expect(d.readOnlySocketPath).toBe('/run/spcd-ro/spcd.sock');
    expect(d.readOnlyGroup).toBeUndefined();
    expect(parse(['--socket', '/tmp/x/api.sock']).readOnlySocketPath).toBe('/tmp/x-ro/api.sock');
    const s = parse(['--readonly-socket', '/run/mon/spcd.sock'], { SPCD_READONLY_GROUP: 'monitoring' });
    expect(s.readOnlySocketPath).toBe('/run/mon/spcd.sock');
    expect(s.readOnlyGroup).toBe('monitoring');
    expect(parse(['--readonly-socket', 'off']).readOnlySocketPath).toBeUndefined();
    for (const bad of ['relative.sock', '/run/spcd/spcd.sock']) {
      expect(() => parse(['--readonly-socket', bad])).toThrow(/--readonly-socket must be an absolute path/);
    }
  });

  it.each([
    [['--relist-interval', 'soon'], /--relist-interval: 'soon' is not a duration/],
    [['--gate-deadline', '600h'], /--gate-deadline: '600h' is longer than the 24h maximum/],
    [
      ['--pull-activity-timeout', '2147483648'],
      /--pull-activity-timeout: '2147483648' is longer than the 24h/,
    ],
    [['--instance', 'bad name'], /--instance: 'bad name' must match/],
    [['--metrics-listen', 'nowhere'], /--metrics-listen: 'nowhere' must be HOST:PORT/],
    [['--log-level', 'loud'], /--log-level: 'loud' is not a pino level/],
    [['--fleet-slots', '0'], /--fleet-slots: '0' must be an integer/],
    [['--kubeconfig', '/k'], /--kubeconfig needs --node-name/],
    [['--kube-insecure'], /--kube-insecure is set but neither --kubeconfig nor in-cluster Kubernetes is/],
    [['--no-such-flag'], /Unknown option '--no-such-flag'/],
    [['--systemctl', '  '], /--systemctl must name a command/],
  ])('rejects %j with a message naming the flag', (argv, message) => {
    let caught: unknown;
    try {
      parseSettings(argv, {});
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SpcdError);
    expect((caught as SpcdError).code).toBe('SETTINGS_INVALID');
    expect((caught as SpcdError).message).toMatch(message);
  });

  it('turns Kubernetes on in a pod (service host and NODE_NAME) with its namespace and slots', () => {
    const s = parse([], {
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
      NODE_NAME: 'compute-1',
      SPCD_FLEET_SLOTS: '3',
    });
    expect(s.kube).toEqual({
      namespace: 'spcd-system',
      desiredConfigMap: undefined,
      fleetSlots: 3,
      insecure: false,
    });
    expect(s.nodeName).toBe('compute-1');
  });

  it('takes --kube-insecure, or SPCD_KUBE_INSECURE, only with Kubernetes', () => {
    const kube = ['--kubeconfig', '/k', '--node-name', 'compute-1'];
    expect(parse([...kube, '--kube-insecure'], {}).kube?.insecure).toBe(true);
    expect(parse(kube, { SPCD_KUBE_INSECURE: 'yes' }).kube?.insecure).toBe(true);
    expect(
      parse([], { KUBERNETES_SERVICE_HOST: '10.0.0.1', NODE_NAME: 'c', SPCD_KUBE_INSECURE: '0' }).kube
        ?.insecure,
    ).toBe(false);
    expect(() => parse(kube, { SPCD_KUBE_INSECURE: 'maybe' })).toThrow(
      /--kube-insecure: 'maybe' is not true or false/,
    );
    expect(() => parse([], { SPCD_KUBE_INSECURE: 'true' })).toThrow(/--kube-insecure is set but neither/);
  });
});
