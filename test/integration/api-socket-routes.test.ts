/**
 * The API on a real unix socket, driven by real clients: curl --unix-socket
 * for every route, and the connection cap. The StatusView and
 * Actions are fakes (the daemon-backed tests belong to the lead).
 */
import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listenUnix } from '../../agent/api/socket.js';
import { apiSocketStand, curl, curlHttp } from '../support/api-socket.js';
import { waitFor } from '../support/wait.js';

const st = apiSocketStand();

describe('every route through curl --unix-socket', () => {
  it.each([
    ['/v1/status', '"version":"0.1.0-test"'],
    ['/v1/sets', '"sets":['],
    ['/v1/sets/compute', '"path":"compute"'],
    ['/v1/sets/compute/neutron', '"path":"compute/neutron"'],
    ['/v1/containers/nova_compute', '"name":"nova_compute"'],
    ['/v1/containers/nova_compute/health', '"checks":['],
    ['/v1/containers/nova_compute/generations', '"generations":['],
    ['/v1/plan', '"items":['],
  ])('GET %s', async (path, expected) => {
    const r = await curlHttp(st, 'GET', path);
    expect(r.status).toBe(200);
    expect(r.body).toContain(expected);
  });

  it('GET logs and metrics', async () => {
    const logs = await curlHttp(st, 'GET', '/v1/containers/cron/logs?tail=2');
    expect(logs).toEqual({ status: 200, body: 'line 2\nline 3\n' });
    const m = await curlHttp(st, 'GET', '/metrics');
    expect(m.status).toBe(200);
    expect(m.body).toContain('spcd_container_state{container="cron",set="infra",state="running"} 1');
  });

  it('GET /v1/events streams an operation followed through its end', async () => {
    const stream = curl(st, ['-N', '--max-time', '3', 'http://spcd/v1/events']);
    await waitFor('the stream subscribed', () => st.status.bus.size > 0, { timeoutMs: 3_000 });
    const ref = JSON.parse((await curlHttp(st, 'POST', '/v1/containers/cron/restart', '{}')).body) as never;
    st.actions.finish(ref, true);
    const r = await stream;
    expect(r.code).toBe(28); // curl's --max-time on an endless stream
    const types = r.out
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { type: string }).type);
    expect(types).toEqual(['operation', 'pull-progress', 'upgrade-step', 'operation']);
  });

  it.each([
    ['/v1/containers/nova_compute/restart', '{}'],
    ['/v1/containers/nova_compute/stop', '{"expectedGeneration":3}'],
    ['/v1/containers/nova_compute/start', '{}'],
    ['/v1/containers/nova_compute/upgrade', '{"image":"spcd-demo/service:2"}'],
    ['/v1/containers/nova_compute/rollback', '{"toGeneration":2}'],
    ['/v1/sets/compute/upgrade', '{}'],
    ['/v1/reload', ''],
  ])('POST %s answers 202', async (path, body) => {
    const r = await curlHttp(st, 'POST', path, body);
    expect(r.status).toBe(202);
    const ref = JSON.parse(r.body) as { operationId: string };
    expect(ref.operationId).toMatch(/^op-/);
    st.actions.finish(ref as never, true);
  });

  it('errors come back in the one shape', async () => {
    const r = await curlHttp(st, 'GET', '/v1/containers/ghost');
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body)).toEqual({
      code: 'NOT_FOUND',
      message: 'no container named ghost',
      details: { container: 'ghost' },
    });
    expect((await curlHttp(st, 'PUT', '/v1/status')).status).toBe(405);
    expect((await curlHttp(st, 'POST', '/v1/containers/cron/upgrade', '{"image":1}')).status).toBe(422);
  });
});

describe('connection cap', () => {
  it('connections over maxConnections are closed; the server serves again once they go', async () => {
    const path = join(st.sockDir, 'capped.sock');
    const s = await listenUnix(st.handler, { socketPath: path, limits: { maxConnections: 3 } });
    const open = await Promise.all(
      [0, 1, 2].map(
        () =>
          new Promise<ReturnType<typeof connect>>((resolve) => {
            const c = connect(path, () => resolve(c));
          }),
      ),
    );
    await waitFor('the server holding the three connections', () => s.connections().open === 3);
    const statusCode = async (): Promise<string> =>
      (
        await curl(st, [
          '-w',
          '%{http_code}',
          '-o',
          '/dev/null',
          '--unix-socket',
          path,
          'http://spcd/v1/status',
        ])
      ).out;
    expect(await statusCode()).not.toBe('200');
    open.forEach((c) => c.destroy());
    let ok = '';
    await waitFor('served again', async () => (ok = await statusCode()) === '200', {
      timeoutMs: 3_000,
    }).catch(() => undefined);
    expect(ok).toBe('200');
    await s.close();
  });
});
