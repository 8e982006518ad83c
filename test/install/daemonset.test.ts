import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/daemon.js';
import { cleanupInstance, docker, inspect } from '../support/docker.js';
import { FakeKubeServer } from '../support/kube-server.js';
import { waitFor } from '../support/wait.js';

/**
 * The DaemonSet's pod, run on the engine from the built image (issue 28,
 * part 3): deploy/kubernetes/30-daemonset.yaml's pod spec read and turned into
 * `docker run` as a kubelet would: its command, env (fieldRefs resolved), the
 * privileged security context, host network and PID namespaces, its volume
 * mounts and the service account's token and CA (what the kubelet mounts), and
 * the readiness probe run by `docker exec` on its period. The Kubernetes side
 * is the in-test API server, over HTTPS (in-cluster config: KUBERNETES_SERVICE_HOST).
 * Differences from a node, all forced by a shared test engine: the hostPath
 * volumes are folders under a temporary root (mounted at the pod spec's
 * paths), the `spcd-sets` ConfigMap is a folder, SPCD_INSTANCE names this
 * test's containers, and where --privileged cannot start (this VM) the pod gets
 * every capability but SYS_RESOURCE, unconfined, instead. The pod must become ready, adopt, heal and upgrade.
 *
 * The image comes from SPCD_DAEMONSET_IMAGE (test/e2e/run-install-e2e.sh).
 */
const IMAGE = process.env.SPCD_DAEMONSET_IMAGE;
const run = promisify(execFile);
const DOCKER = '/usr/bin/docker';
const id = `${process.pid}-${Math.floor(Math.random() * 1e6)}`;
const instance = `t-dset-${id}`;
const pod = `spcd-dset-${id}`;
const NODE = `compute-${id}`;
const NS = 'spcd-system';
const svc = `${instance}-svc`;
const root = mkdtempSync(join(tmpdir(), 'spcd-dset-'));
const server = new FakeKubeServer();
const result: Record<string, number> = {};

interface Container {
  command: string[];
  env: { name: string; value?: string; valueFrom?: { fieldRef: { fieldPath: string } } }[];
  securityContext: { privileged?: boolean };
  readinessProbe: { exec: { command: string[] }; periodSeconds: number; failureThreshold: number };
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface PodSpec {
  hostNetwork?: boolean;
  hostPID?: boolean;
  terminationGracePeriodSeconds?: number;
  containers: Container[];
  volumes: { name: string; hostPath?: { path: string }; configMap?: { name: string } }[];
}
const manifest = yaml.load(readFileSync(join(REPO, 'deploy/kubernetes/30-daemonset.yaml'), 'utf8')) as {
  spec: { template: { spec: PodSpec } };
};
const spec = manifest.spec.template.spec;
const container = spec.containers[0]!;

const probe = async (): Promise<boolean> =>
  run(DOCKER, ['exec', pod, ...container.readinessProbe.exec.command], { timeout: 5_000 }).then(
    () => true,
    () => false,
  );

let privilegedStarts = true;

function dockerRunArgs(): string[] {
  const args = ['run', '-d', '--name', pod, '--entrypoint', container.command[0]!];
  if (spec.hostNetwork) args.push('--network', 'host');
  if (spec.hostPID) args.push('--pid', 'host');
  if (container.securityContext.privileged) {
    // This VM's bounding set lacks SYS_RESOURCE, so --privileged cannot start
    // here (test-environment.md): every other capability, unconfined, instead.
    if (privilegedStarts) args.push('--privileged');
    else
      args.push(
        '--cap-add',
        'ALL',
        '--cap-drop',
        'SYS_RESOURCE',
        '--security-opt',
        'seccomp=unconfined',
        '--security-opt',
        'apparmor=unconfined',
      );
  }
  if (spec.terminationGracePeriodSeconds)
    args.push('--stop-timeout', String(spec.terminationGracePeriodSeconds));
  const fields: Record<string, string> = { 'spec.nodeName': NODE, 'metadata.namespace': NS };
  for (const e of container.env) {
    const v = e.value ?? fields[e.valueFrom!.fieldRef.fieldPath];
    if (v === undefined) throw new Error(`env ${e.name}: no value for ${JSON.stringify(e.valueFrom)}`);
    args.push('-e', `${e.name}=${v}`);
  }
  // what the kubelet adds: the API server's address and the service account
  args.push('-e', 'KUBERNETES_SERVICE_HOST=127.0.0.1', '-e', `KUBERNETES_SERVICE_PORT=${server.port}`);
  args.push('-v', `${join(root, 'serviceaccount')}:/var/run/secrets/kubernetes.io/serviceaccount:ro`);
  // this test's own containers (a shared engine)
  args.push('-e', `SPCD_INSTANCE=${instance}`);
  for (const m of container.volumeMounts) {
    const vol = spec.volumes.find((v) => v.name === m.name)!;
    let src: string;
    if (vol.hostPath?.path === '/var/run/docker.sock') src = '/var/run/docker.sock';
    else if (vol.hostPath) src = join(root, 'host', vol.hostPath.path);
    else src = join(root, 'configmaps', vol.configMap!.name);
    if (src !== '/var/run/docker.sock') mkdirSync(src, { recursive: true, mode: 0o755 });
    args.push('-v', `${src}:${m.mountPath}${m.readOnly ? ':ro' : ''}`);
  }
  args.push(IMAGE!, ...container.command.slice(1));
  return args;
}

describe.skipIf(!IMAGE)('the DaemonSet pod spec, run from the built image', () => {
  beforeAll(async () => {
    privilegedStarts = await run(DOCKER, ['run', '--rm', '--privileged', 'spcd-demo/service:1', 'true']).then(
      () => true,
      () => false,
    );
    const sa = join(root, 'serviceaccount');
    mkdirSync(sa, { recursive: true });
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(root, 'key.pem'),
        '-out',
        join(sa, 'ca.crt'),
      ],
      { stdio: 'ignore' },
    );
    writeFileSync(join(sa, 'token'), 'test-token');
    writeFileSync(join(sa, 'namespace'), NS);
    await server.start(0, {
      key: readFileSync(join(root, 'key.pem'), 'utf8'),
      cert: readFileSync(join(sa, 'ca.crt'), 'utf8'),
    });
    server.put('nodes', null, { metadata: { name: NODE }, status: { conditions: [] } });
    // the spcd-sets ConfigMap's one key, and the host's /etc/spcd
    mkdirSync(join(root, 'configmaps', 'spcd-sets'), { recursive: true });
    writeFileSync(
      join(root, 'configmaps', 'spcd-sets', 'dset.yaml'),
      `set: dset\ncontainers:\n  ${svc}:\n    image: spcd-demo/service:1\n    command: [demo-service, sleep]\n    network: none\n    stop_grace_period: 1s\n    healthchecks:\n      - { name: daemon, exec: [demo-check], interval: 2s, timeout: 1s }\n`,
    );
    mkdirSync(join(root, 'host', 'etc', 'spcd'), { recursive: true });
    writeFileSync(join(root, 'host', 'etc', 'spcd', 'overrides.yaml'), 'containers: {}\n');
    execFileSync(DOCKER, dockerRunArgs(), { stdio: ['ignore', 'ignore', 'inherit'] });
  }, 300_000);

  afterAll(async () => {
    await run(DOCKER, ['rm', '-f', pod]).catch(() => undefined);
    await cleanupInstance(instance);
    await server.stop();
    rmSync(root, { recursive: true, force: true });
    const line = `daemonset_pod_ready=${result.ready ?? 0} adopted=${result.adopted ?? 0} healed=${result.healed ?? 0} upgraded=${result.upgraded ?? 0}`;
    if (process.env.SPCD_DAEMONSET_RESULT) writeFileSync(process.env.SPCD_DAEMONSET_RESULT, `${line}\n`);
    process.stdout.write(`${line}\n`);
  });

  const logs = async (): Promise<string> =>
    (await run(DOCKER, ['logs', '--tail', '30', pod]).catch(() => ({ stdout: '', stderr: '' }))).stderr;

  it('becomes ready (its readiness probe answers) and runs its set', async () => {
    const { readinessProbe } = container;
    // within the probe's failure budget after the start
    await waitFor('the readiness probe passes', probe, {
      timeoutMs: (readinessProbe.periodSeconds * readinessProbe.failureThreshold + 30) * 1000,
      intervalMs: 1_000,
    }).catch(async (e: unknown) => {
      throw new Error(`${(e as Error).message}\n${await logs()}`);
    });
    await waitFor('svc running', async () => (await inspect(svc))?.State.Running, { timeoutMs: 60_000 });
    await waitFor('node annotated', () =>
      Boolean(
        (server.get('nodes', null, NODE)?.metadata.annotations as Record<string, string> | undefined)?.[
          'spcd.openstack.org/sets'
        ],
      ),
    );
    result.ready = 1;
  });

  it("reaches the host's systemctl with its --systemctl command (nsenter into a host process's mount namespace)", async () => {
    const value = container.env.find((e) => e.name === 'SPCD_SYSTEMCTL')?.value;
    expect(value, 'the pod spec sets SPCD_SYSTEMCTL').toBe('nsenter --target 1 --mount -- systemctl');
    // The words spcd runs before `show`, here before `--version`. This VM's PID 1 is not systemd and
    // refuses nsenter even to the host's root (test-environment.md), so the pod enters the mount
    // namespace of this test's own process on the host instead: the host's systemctl, from the pod.
    const words = value!.split(' ').map((w) => (w === '1' ? String(process.pid) : w));
    const r = await run(DOCKER, ['exec', pod, ...words, '--version'], { timeout: 30_000 });
    expect(r.stdout).toMatch(/^systemd \d+/);
  });

  it('adopts its containers when the pod is replaced', async () => {
    const before = await inspect(svc);
    await run(DOCKER, ['rm', '-f', pod]);
    execFileSync(DOCKER, dockerRunArgs(), { stdio: ['ignore', 'ignore', 'inherit'] });
    await waitFor('ready again', probe, { timeoutMs: 60_000, intervalMs: 1_000 });
    await new Promise((r) => setTimeout(r, 3_000));
    const after = await inspect(svc);
    expect(after?.Id).toBe(before?.Id);
    expect(after?.State.StartedAt).toBe(before?.State.StartedAt);
    result.adopted = 1;
  });

  it('heals a container that dies', async () => {
    const before = await inspect(svc);
    await docker().getContainer(svc).kill();
    await waitFor(
      'svc running again',
      async () => {
        const c = await inspect(svc);
        return c?.State.Running && c.State.StartedAt !== before?.State.StartedAt;
      },
      { timeoutMs: 60_000 },
    );
    result.healed = 1;
  });

  it('upgrades when the desired ConfigMap names a new image', async () => {
    server.put('configmaps', NS, {
      metadata: { name: 'spcd-desired' },
      data: { images: `${svc}: spcd-demo/service:2\n` },
    });
    await waitFor(
      'svc on :2',
      async () => {
        const c = await inspect(svc);
        return c?.Config.Image === 'spcd-demo/service:2' && c.State.Running;
      },
      { timeoutMs: 90_000 },
    ).catch(async (e: unknown) => {
      throw new Error(`${(e as Error).message}\n${await logs()}`);
    });
    expect(await probe()).toBe(true);
    result.upgraded = 1;
  });
});
