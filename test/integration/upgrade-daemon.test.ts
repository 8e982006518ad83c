import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../support/api-http.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, containersOf, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * Through the real daemon: a definition change (+ SIGHUP) of a container
 * with a health check runs the transaction (kind 'recreate'), the gate
 * passes on the new instance, and afterwards spcd's checks run against the
 * new instance (the check prints the container's hostname, i.e. its short id).
 */
const sb: Sandbox = sandbox('upgdaemon');
const name = `${sb.instance}-svc`;
let spcd: SpcdProcess | undefined;

const setYaml = (image: string): string => `
set: upd
containers:
  ${name}:
    image: ${image}
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
    healthchecks:
      - { name: who, shell: "demo-check >/dev/null && hostname", interval: 1s, timeout: 900ms, failure_threshold: 2 }
`;

interface HealthView {
  status: string;
  checks: { name: string; history: { ok: boolean; output: string }[] }[];
}

/** A GET through the recording client: the answer is checked against the OpenAPI document. */
async function getJson<T>(path: string): Promise<T> {
  const a = await call(sb.socket, 'GET', path);
  if (a.status !== 200) throw new Error(`${a.status} ${a.text}`);
  return a.json() as T;
}

beforeAll(async () => {
  writeSet(sb, 'upd.yaml', setYaml('spcd-demo/service:1'));
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
  await waitFor('generation 1 running', async () => (await inspect(name))?.State.Running);
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('upgrade through the daemon', () => {
  it('recreates at N+1 behind the health gate and keeps checking the new instance', async () => {
    const first = (await inspect(name))!;
    await waitFor('checks on generation 1', async () => {
      const h = await getJson<HealthView>(`/v1/containers/${name}/health`);
      return h.status === 'healthy' && h.checks[0]!.history.at(-1)?.output.trim() === first.Id.slice(0, 12);
    });
    writeSet(sb, 'upd.yaml', setYaml('spcd-demo/service:2'));
    spcd!.child.kill('SIGHUP');
    const second = await waitFor(
      'generation 2 running alone',
      async () => {
        const list = await containersOf(sb.instance);
        const c = await inspect(name);
        return list.length === 1 && c?.State.Running && c.Config.Labels['spcd.generation'] === '2'
          ? c
          : false;
      },
      { timeoutMs: 30_000 },
    );
    expect(second.Config.Image).toBe('spcd-demo/service:2');
    expect(spcd!.logged('upgrade failed; rolling back')).toBe(false);
    // The health room follows the new instance.
    await waitFor('checks on generation 2', async () => {
      const h = await getJson<HealthView>(`/v1/containers/${name}/health`);
      return h.status === 'healthy' && h.checks[0]!.history.at(-1)?.output.trim() === second.Id.slice(0, 12);
    });
    const gens = await getJson<{ generations: { generation: number; outcome: string }[] }>(
      `/v1/containers/${name}/generations`,
    );
    const byNumber = [...gens.generations].sort((a, b) => a.generation - b.generation);
    expect(byNumber.map((g) => [g.generation, g.outcome])).toEqual([
      [1, 'superseded'],
      [2, 'current'],
    ]);
  });
});
