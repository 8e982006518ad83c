/**
 * spcd on a real Podman service (scripts/podman/ensure-podman.sh), through
 * Podman's Docker-compatible API, as a Kolla host that runs Podman has it:
 * the set comes up, a failing check and a killed container are healed, an
 * upgrade to an image that cannot start rolls back, spcd restarts without
 * restarting a container, and a restart of the Podman service itself stops
 * no container. The project (vitest.config.ts, `podman`) points
 * SPCD_DOCKER_SOCKET at Podman and sets SPCD_ENGINE=podman for spcd.
 */
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerEngine } from '../../agent/engine/docker.js';
import type { EngineEvent } from '../../agent/engine/types.js';
import { silentLogger } from '../../agent/log.js';
import { call } from '../support/api-http.js';
import { demoContainerYaml, REPO, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, crash, docker, DOCKER_SOCKET, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('podman');
const n = (s: string): string => `${sb.instance}-${s}`;

const SET = `
set: pm
containers:
${demoContainerYaml(n('web'), [
  'stop_grace_period: 1s',
  'healthchecks:',
  '  - { name: flag, exec: [sh, -c, "test ! -f /tmp/fail"], interval: 1s, timeout: 900ms, failure_threshold: 2 }',
])}${demoContainerYaml(n('worker'), ['stop_grace_period: 1s'])}`;

let spcd: SpcdProcess;

async function json(
  method: string,
  path: string,
  body?: object,
): Promise<{ status: number; data: Record<string, unknown> }> {
  const a = await call(sb.socket, method, path, body);
  return { status: a.status, data: a.json() as Record<string, unknown> };
}

/** The API's view of one container. */
const container = async (name: string): Promise<Record<string, unknown>> =>
  (await json('GET', `/v1/containers/${name}`)).data;

const generation = async (name: string): Promise<number | undefined> =>
  (await container(name)).generation as number | undefined;

/** State.StartedAt and State.Pid of a running container, as Podman reports them. */
async function runningAs(name: string): Promise<string | undefined> {
  const c = await inspect(name);
  return c?.State.Running ? `${c.State.StartedAt} pid ${c.State.Pid}` : undefined;
}

/** Runs a command in a container through Podman's exec API. */
async function execIn(name: string, cmd: string[]): Promise<void> {
  const exec = await docker().getContainer(name).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({});
  await new Promise<void>((resolve) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.resume();
  });
}

beforeAll(async () => {
  writeSet(sb, 'pm.yaml', SET);
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
  await waitFor('web and worker running', async () => (await runningAs(n('web'))) && runningAs(n('worker')));
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('spcd on Podman', () => {
  it('runs the set on Podman, and its preflight names Podman', async () => {
    const status = await json('GET', '/v1/status');
    expect(status.data).toMatchObject({ instance: sb.instance, engine: { available: true } });
    const checks = (status.data.preflight as { checks: { name: string; ok: boolean; detail: string }[] })
      .checks;
    expect(checks.find((c) => c.name === 'docker-engine')).toMatchObject({
      ok: true,
      detail: expect.stringMatching(/^Podman 4\./),
    });
    expect(checks.find((c) => c.name === 'docker-live-restore')?.detail).toMatch(/conmon/);
    expect((await docker().version()).Components?.map((c) => c.Name)).toContain('Podman Engine');
    expect(await generation(n('web'))).toBe(1);
  });

  it('restarts a container whose check starts failing', async () => {
    await waitFor(
      'web healthy',
      async () => (await json('GET', `/v1/containers/${n('web')}/health`)).data.status === 'healthy',
    );
    const before = await runningAs(n('web'));
    await execIn(n('web'), ['touch', '/tmp/fail']);
    // A restart keeps the container (and its /tmp): the file is removed once the new start is seen.
    await waitFor('web restarted by its check', async () => {
      const now = await runningAs(n('web'));
      return now !== undefined && now !== before;
    });
    await execIn(n('web'), ['rm', '-f', '/tmp/fail']);
    expect(spcd.logged('restarting unhealthy container')).toBe(true);
    await waitFor(
      'web healthy again',
      async () => (await json('GET', `/v1/containers/${n('web')}/health`)).data.status === 'healthy',
    );
  });

  it('starts a killed container again', async () => {
    const before = await runningAs(n('worker'));
    await crash(n('worker'));
    await waitFor('worker running again', async () => {
      const now = await runningAs(n('worker'));
      return now !== undefined && now !== before;
    });
  });

  it('rolls an upgrade to an image that cannot start back to the last known good', async () => {
    const g = (await generation(n('worker')))!;
    const up = await json('POST', `/v1/containers/${n('worker')}/upgrade`, {
      image: 'spcd-demo/service:crash',
    });
    expect(up.status).toBe(202);
    // The log says the rollback ended before the next list shows the old instance: wait for both.
    await waitFor('the failed upgrade rolled back, the old instance shown', async () => {
      const c = await container(n('worker'));
      return (
        spcd.logged(`failed and was rolled back to ${g}`) &&
        c.operation === null &&
        c.state === 'running' &&
        c.generation === g &&
        // The operator's reference, not the one Podman resolved it to (localhost/spcd-demo/service:1).
        c.image === 'spcd-demo/service:1'
      );
    });
    expect((await inspect(n('worker')))?.Config.Image).toBe('localhost/spcd-demo/service:1');
  });

  it('adopts its running containers after a restart of spcd, restarting none', async () => {
    const before = [await runningAs(n('web')), await runningAs(n('worker'))];
    await spcd.kill9();
    spcd = SpcdProcess.start(sb);
    await spcd.ready();
    expect([await runningAs(n('web')), await runningAs(n('worker'))]).toEqual(before);
  });

  it('a restart of the Podman service stops no container; spcd waits for it and carries on', async () => {
    const before = [await runningAs(n('web')), await runningAs(n('worker'))];
    execFileSync('pkill', ['-TERM', '-f', '^podman system service']);
    await waitFor('spcd saw the engine go', () => spcd.logged('"engine unavailable"'), { timeoutMs: 30_000 });
    execFileSync('bash', [`${REPO}/scripts/podman/ensure-podman.sh`], { stdio: 'ignore' });
    await waitFor('spcd saw the engine back', async () => {
      const s = await json('GET', '/v1/status');
      return (s.data.engine as { available: boolean }).available;
    });
    expect([await runningAs(n('web')), await runningAs(n('worker'))]).toEqual(before);
    // And spcd still heals: the event stream and the checks came back with the service.
    await crash(n('worker'));
    await waitFor('worker running again after the service restart', async () => {
      const now = await runningAs(n('worker'));
      return now !== undefined && now !== before[1];
    });
  });
});

describe("the engine adapter on Podman's events", () => {
  it("reads Podman's removal as destroy, beside start and die", async () => {
    const engine = new DockerEngine({ socketPath: DOCKER_SOCKET, log: silentLogger() });
    const instance = `${sb.instance}-ev`;
    const seen: EngineEvent[] = [];
    const sub = engine.subscribe(instance, (e) => seen.push(e));
    try {
      const c = await docker().createContainer({
        Image: 'spcd-demo/service:1',
        Cmd: ['demo-service', 'sleep'],
        name: `${instance}-one`,
        Labels: { 'spcd.instance': instance },
        HostConfig: { NetworkMode: 'none' },
      });
      await c.start();
      await c.kill();
      await c.remove({ force: true });
      const actions = await waitFor('start, die and destroy', () => {
        const a = seen
          .filter((e) => e.kind === 'container')
          .map((e) => (e.kind === 'container' ? e.action : ''));
        return a.includes('destroy') ? a : undefined;
      });
      expect(actions).toEqual(expect.arrayContaining(['create', 'start', 'die', 'destroy']));
    } finally {
      sub.close();
    }
  });
});

describe('--engine docker on a Podman socket', () => {
  const other: Sandbox = sandbox('podmanwrong');
  afterAll(async () => cleanupInstance(other.instance));

  it('blocks new containers at preflight, naming the engine that answers', async () => {
    writeSet(other, 'w.yaml', `set: w\ncontainers:\n${demoContainerYaml(`${other.instance}-one`)}`);
    const wrong = SpcdProcess.start(other, ['--engine', 'docker']);
    try {
      await wrong.ready();
      await waitFor('preflight blocked', () =>
        wrong.logged('preflight blocks new containers: docker-engine'),
      );
      const status = await call(other.socket, 'GET', '/v1/status');
      const checks = (
        status.json() as { preflight: { checks: { name: string; ok: boolean; detail: string }[] } }
      ).preflight.checks;
      expect(checks.find((c) => c.name === 'docker-engine')).toMatchObject({
        ok: false,
        detail: expect.stringMatching(/^--engine docker, but Podman 4\.\S+ answers on the socket/),
      });
      expect(await inspect(`${other.instance}-one`)).toBeUndefined();
    } finally {
      await wrong.stop();
    }
  });
});
