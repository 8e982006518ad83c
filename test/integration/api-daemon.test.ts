import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inOrder } from '../support/in-order.js';
import { apiContract, documentedOperations, unexercised } from '../support/api-contract.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, docker, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);
const sb: Sandbox = sandbox('apid');
const n = (s: string): string => `${sb.instance}-${s}`;
let spcd: SpcdProcess;

/**
 * A real client: curl over the unix socket. Returns status and body; each
 * answer is checked against the OpenAPI document (test/support/api-contract.ts).
 */
async function curl(
  method: string,
  path: string,
  body?: unknown,
  extra: string[] = [],
): Promise<{ status: number; body: string }> {
  const args = [
    '-s',
    '--unix-socket',
    sb.socket,
    '-X',
    method,
    '-w',
    '\n%{content_type}\n%{http_code}',
    ...extra,
  ];
  const sent = body === undefined ? undefined : JSON.stringify(body);
  if (sent !== undefined) args.push('-H', 'content-type: application/json', '-d', sent);
  args.push(`http://spcd${path}`);
  const { stdout } = await run('curl', args, { maxBuffer: 8 * 1024 * 1024 });
  const last = stdout.lastIndexOf('\n');
  const status = Number(stdout.slice(last + 1));
  const head = stdout.slice(0, last);
  const text = head.slice(0, head.lastIndexOf('\n'));
  const contentType = head.slice(head.lastIndexOf('\n') + 1);
  apiContract().check({ method, path, requestBody: sent, status, contentType, text });
  return { status, body: text };
}
const json = async (
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; data: Record<string, unknown> }> => {
  const r = await curl(method, path, body);
  return { status: r.status, data: JSON.parse(r.body) as Record<string, unknown> };
};
const generation = async (name: string): Promise<number> =>
  ((await json('GET', `/v1/containers/${name}`)).data.generation as number) ?? 0;

beforeAll(async () => {
  writeSet(
    sb,
    'api.yaml',
    `set: api\ndescription: api test\ncontainers:\n${demoContainerYaml(n('web'), ['stop_grace_period: 1s'])}    healthchecks:\n      - { name: self, exec: [demo-check], interval: 1s, timeout: 500ms }\nsets:\n  inner:\n    containers:\n      ${n('worker')}:\n        image: spcd-demo/service:1\n        command: [demo-service, sleep]\n        network: none\n        stop_grace_period: 1s\n`,
  );
  spcd = SpcdProcess.start(sb, ['--gate-deadline', '20s']);
  await spcd.ready();
  await waitFor(
    'both running',
    async () => (await inspect(n('web')))?.State.Running && (await inspect(n('worker')))?.State.Running,
  );
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  // The adoption test's container has no spcd label once released: removed by name.
  await run('/usr/bin/docker', ['rm', '-f', n('legacy')]).catch(() => undefined);
});

describe('the API of a running spcd, through curl --unix-socket', () => {
  inOrder();
  it('answers every read route', async () => {
    await waitFor(
      'status shows both running',
      async () =>
        JSON.stringify((await json('GET', '/v1/status')).data).split('"state":"running"').length === 3,
    );
    const status = await json('GET', '/v1/status');
    expect(status.status).toBe(200);
    expect(status.data).toMatchObject({ instance: sb.instance, engine: { available: true } });
    const tree = status.data.sets as {
      path: string;
      containers: { name: string; generation: number; state: string }[];
      sets: unknown[];
    }[];
    expect(tree[0]).toMatchObject({
      path: 'api',
      containers: [{ name: n('web'), generation: 1, state: 'running' }],
    });
    expect((status.data.preflight as { checks: unknown[] }).checks.length).toBeGreaterThan(0);
    expect((await json('GET', '/v1/sets')).status).toBe(200);
    expect((await json('GET', '/v1/sets/api/inner')).data).toMatchObject({ path: 'api/inner' });
    const c = await json('GET', `/v1/containers/${n('web')}`);
    expect(c.data).toMatchObject({
      name: n('web'),
      set: 'api',
      image: 'spcd-demo/service:1',
      restartCount: 0,
    });
    await waitFor(
      'web healthy',
      async () => (await json('GET', `/v1/containers/${n('web')}/health`)).data.status === 'healthy',
    );
    const h = await json('GET', `/v1/containers/${n('web')}/health`);
    expect((h.data.checks as { name: string; history: unknown[] }[])[0]!.history.length).toBeGreaterThan(0);
    const g = await json('GET', `/v1/containers/${n('web')}/generations`);
    expect(g.status).toBe(200);
    const logs = await curl('GET', `/v1/containers/${n('web')}/logs?tail=5`);
    expect(logs.status).toBe(200);
    expect(logs.body).toContain('demo-service role=sleep');
    const metrics = await curl('GET', '/metrics');
    expect(metrics.body).toContain(`spcd_container_generation{container="${n('web')}",set="api"} 1`);
    expect(metrics.body).toContain('spcd_engine_available 1');
    // The exposition format: each family declared once, its samples after its TYPE line.
    const declared = new Map<string, number>();
    const lines = metrics.body.split('\n').filter((l) => l !== '');
    for (const line of lines) {
      const m = /^# TYPE (\S+) /.exec(line);
      if (m) declared.set(m[1]!, (declared.get(m[1]!) ?? 0) + 1);
    }
    expect([...declared].filter(([, count]) => count > 1)).toEqual([]);
    let family = '';
    for (const line of lines) {
      const m = /^# TYPE (\S+) /.exec(line);
      if (m) family = m[1]!;
      else if (!line.startsWith('#')) expect(line.split(/[{ ]/)[0]!.startsWith(family), line).toBe(true);
    }
    const plan = await json('GET', '/v1/plan');
    expect(plan.data).toMatchObject({ items: [] });
    const missing = await json('GET', '/v1/containers/nope');
    expect(missing).toMatchObject({ status: 404, data: { code: 'NOT_FOUND' } });
  });

  it('streams events while a restart runs, and the restart keeps the generation', async () => {
    const events = run('curl', [
      '-sN',
      '--max-time',
      '6',
      '--unix-socket',
      sb.socket,
      'http://spcd/v1/events',
    ]).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
    await new Promise((r) => setTimeout(r, 300)); // let curl connect before the operation starts
    const before = (await inspect(n('worker')))!.State.StartedAt;
    const r = await json('POST', `/v1/containers/${n('worker')}/restart`, {});
    expect(r.status).toBe(202);
    expect(r.data.operationId).toMatch(/^restart-/);
    await waitFor('worker restarted', async () => (await inspect(n('worker')))?.State.StartedAt !== before);
    const raw = (await events).stdout.split('\n').filter(Boolean);
    raw.forEach((l) => apiContract().checkEventLine(l));
    const lines = raw.map((l) => JSON.parse(l) as { type: string; operationId?: string; phase?: string });
    expect(
      lines.some(
        (e) => e.type === 'operation' && e.operationId === r.data.operationId && e.phase === 'succeeded',
      ),
    ).toBe(true);
    expect(await generation(n('worker'))).toBe(1);
  });

  it('a container stopped by the operator stays stopped; start brings it back', async () => {
    expect((await json('POST', `/v1/containers/${n('worker')}/stop`, {})).status).toBe(202);
    await waitFor(
      'stopped',
      async () => (await json('GET', `/v1/containers/${n('worker')}`)).data.state === 'stopped',
    );
    expect((await json('POST', `/v1/containers/${n('worker')}/start`, {})).status).toBe(202);
    await waitFor(
      'running',
      async () => (await json('GET', `/v1/containers/${n('worker')}`)).data.state === 'running',
    );
  });

  it('of two concurrent upgrades of one container exactly one wins; the other gets 409', async () => {
    const [a, b] = await Promise.all([
      json('POST', `/v1/containers/${n('web')}/upgrade`, { image: 'spcd-demo/service:2' }),
      json('POST', `/v1/containers/${n('web')}/upgrade`, { image: 'spcd-demo/service:3' }),
    ]);
    expect([a.status, b.status].sort()).toEqual([202, 409]);
    const loser = a.status === 409 ? a : b;
    expect(loser.data.code).toBe('CONFLICT');
    await waitFor('web at generation 2', async () => (await generation(n('web'))) === 2, {
      timeoutMs: 30_000,
    });
    const winnerImage = a.status === 202 ? 'spcd-demo/service:2' : 'spcd-demo/service:3';
    expect((await json('GET', `/v1/containers/${n('web')}`)).data.image).toBe(winnerImage);
  });

  it('refuses a stale expectedGeneration with 409, and rolls back to the last known good', async () => {
    await waitFor(
      'web free',
      async () => (await json('GET', `/v1/containers/${n('web')}`)).data.operation === null,
    );
    const stale = await json('POST', `/v1/containers/${n('web')}/upgrade`, {
      image: 'spcd-demo/service:3',
      expectedGeneration: 1,
    });
    expect(stale).toMatchObject({ status: 409, data: { code: 'GENERATION_MISMATCH' } });
    const rb = await json('POST', `/v1/containers/${n('web')}/rollback`, {});
    expect(rb.status).toBe(202);
    await waitFor('web at generation 3', async () => (await generation(n('web'))) === 3, {
      timeoutMs: 30_000,
    });
    expect((await json('GET', `/v1/containers/${n('web')}`)).data.image).toBe('spcd-demo/service:1');
    await waitFor('generation 3 committed', async () => {
      const g = (await json('GET', `/v1/containers/${n('web')}/generations`)).data.generations as {
        outcome: string;
      }[];
      return g[0]?.outcome === 'current';
    });
    const gens = (await json('GET', `/v1/containers/${n('web')}/generations`)).data.generations as {
      generation: number;
      from?: number;
      outcome: string;
    }[];
    expect(gens[0]).toMatchObject({ generation: 3, from: 1, outcome: 'current' });
    expect(gens[1]).toMatchObject({ generation: 2, outcome: 'superseded' });
    const diff = await json('GET', `/v1/containers/${n('web')}/generations/diff?from=2&to=3`);
    expect(diff.status).toBe(200);
    expect(diff.data).toMatchObject({
      name: n('web'),
      from: { generation: 2 },
      to: { generation: 3, image: 'spcd-demo/service:1' },
      image: { to: 'spcd-demo/service:1' },
    });
  });

  it('upgrades a whole set, reloads, and rejects bad requests with the catalogue', async () => {
    await waitFor(
      'web free',
      async () => (await json('GET', `/v1/containers/${n('web')}`)).data.operation === null,
    );
    const set = await json('POST', '/v1/sets/api/upgrade', {
      images: { [n('worker')]: 'spcd-demo/service:2' },
    });
    expect(set.status).toBe(202);
    await waitFor('worker at generation 2', async () => (await generation(n('worker'))) === 2, {
      timeoutMs: 30_000,
    });
    expect((await json('POST', '/v1/reload', {})).status).toBe(202);
    expect((await json('POST', `/v1/containers/${n('web')}/upgrade`, {})).data.code).toBe('UNPROCESSABLE');
    const bad = await curl('POST', `/v1/containers/${n('web')}/upgrade`, undefined, [
      '-H',
      'content-type: application/json',
      '-d',
      '{bad',
    ]);
    expect(bad.status).toBe(400);
  });

  it('scans a container spcd did not create, adopts it on the word of the API, and releases it', async () => {
    const legacy = await docker().createContainer({
      name: n('legacy'),
      Image: 'spcd-demo/service:1',
      Cmd: ['demo-service', 'sleep'],
      HostConfig: { NetworkMode: 'none' },
    });
    await legacy.start();
    const startedAt = (await inspect(n('legacy')))!.State.StartedAt;
    const scan = await json('GET', '/v1/adopt/scan');
    expect(scan.status).toBe(200);
    const entry = (scan.data.containers as { name: string; definition: Record<string, unknown> }[]).find(
      (c) => c.name === n('legacy'),
    );
    expect(entry, 'the scan lists the container').toBeDefined();
    // The operator's set is the scan's entry, as it is.
    writeFileSync(
      join(sb.setsDir, 'legacy.yaml'),
      dump({ set: 'legacy', containers: { [n('legacy')]: entry!.definition } }),
    );
    expect((await json('POST', '/v1/reload', {})).status).toBe(202);
    await waitFor('the plan says adopt', async () => {
      const items = (await json('GET', '/v1/plan')).data.items as { container: string; action: string }[];
      return items.some((i) => i.container === n('legacy') && i.action === 'adopt');
    });
    expect((await json('POST', `/v1/containers/${n('legacy')}/adopt`, {})).status).toBe(202);
    await waitFor('adopted as generation 1', async () => (await generation(n('legacy'))) === 1, {
      timeoutMs: 30_000,
    });
    await waitFor(
      'legacy free',
      async () => (await json('GET', `/v1/containers/${n('legacy')}`)).data.operation === null,
    );
    expect((await json('POST', `/v1/containers/${n('legacy')}/release`, {})).status).toBe(202);
    // Neither verb stopped or restarted it.
    expect((await inspect(n('legacy')))!.State.StartedAt).toBe(startedAt);
  });

  it('served the OpenAPI document of this build, and answered every route in it as it says', async () => {
    const served = await json('GET', '/v1/openapi.json');
    expect(served.status).toBe(200);
    const contract = apiContract();
    expect({ ...served.data, info: null }).toEqual({ ...contract.document, info: null });
    // every answer above went through the contract check; here: none of the routes was left out
    expect(unexercised(contract, documentedOperations(contract.document), [200, 202])).toEqual([]);
    expect(contract.seen.has('GET /v1/events 200')).toBe(true);
  });
});
