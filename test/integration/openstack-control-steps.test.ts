/**
 * The OpenStack e2e's step helpers (test/e2e/openstack-control-steps.ts) on a
 * real spcd with the demo image, so what the long VM run relies on is
 * checked in seconds: restartHealthy waits for the new start's checks (right
 * after a restart spcd's health view lists no checks until its next pass),
 * and upgradeSet accepts a member at a later generation than the next (a
 * rolled-back attempt used one up), with each member's figures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventTap, SpcdApi } from '../e2e/libvirt-e2e-harness.js';
import { SpcdActions, type SpcdControl } from '../e2e/openstack-actions.js';
import { restartHealthy, upgradeSet } from '../e2e/openstack-control-steps.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('ctls');
const n = (s: string): string => `${sb.instance}-${s}`;
let spcd: SpcdProcess | undefined;
let tap: EventTap | undefined;
const api = new SpcdApi(sb.socket);
const ctl: SpcdControl = {
  api: () => api,
  tap: () => tap!,
  spcd: () => spcd!,
  startSpcd: async (env) => {
    spcd = SpcdProcess.start(sb, ['--gate-deadline', '20s'], env);
    await spcd.ready();
    tap = await EventTap.open(sb.socket);
  },
  libvirt: () => n('none'),
};
const actions = new SpcdActions(ctl);
// A check that passes at once, run every 10 s but at once and every 200 ms after a start.
const member = (name: string, dependsOn?: string): string =>
  `${demoContainerYaml(n(name), ['stop_grace_period: 1s'])}` +
  (dependsOn ? `    depends_on: [${n(dependsOn)}]\n` : '') +
  `    healthchecks:\n      - { name: self, exec: [demo-check], interval: 10s, timeout: 2s, start_period: 30s, start_interval: 200ms }\n`;

beforeAll(async () => {
  writeSet(sb, 'ctl.yaml', `set: ctl\ndescription: ctl\ncontainers:\n${member('db')}${member('api', 'db')}`);
  await ctl.startSpcd();
  for (const c of ['db', 'api'])
    await waitFor(`${c} healthy`, async () => (await api.container(n(c))).health === 'healthy', {
      timeoutMs: 60_000,
      intervalMs: 200,
    });
}, 120_000);

afterAll(async () => {
  tap?.close();
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

const figure = (line: string, key: string): number => Number(new RegExp(`${key}=([\\d.]+)`).exec(line)?.[1]);

describe('the e2e step helpers on a real spcd', () => {
  it('restartHealthy returns once the new start passed its check, after the start itself', async () => {
    for (let i = 0; i < 3; i++) {
      const a = await restartHealthy(ctl, actions, n('db'));
      const running = figure(a.spcd, 'stop_to_running_s');
      const healthy = figure(a.spcd, 'stop_to_healthy_s');
      expect(a.spcd).toContain('others_restarted=none');
      expect(healthy, a.spcd).toBeGreaterThanOrEqual(running);
      const h = await api.get<{ status: string; checks: { history: { at: string; ok: boolean }[] }[] }>(
        `/v1/containers/${n('db')}/health`,
      );
      expect(h.status).toBe('healthy');
      expect(h.checks[0]!.history.some((r) => r.ok && Date.parse(r.at) > a.stopAt)).toBe(true);
    }
  }, 120_000);

  it('upgradeSet takes every member to its image, at a later generation even after a rolled-back attempt', async () => {
    // A failed upgrade of api (its image crashes) uses a generation up and is rolled back.
    const before = await api.container(n('api'));
    const op = await api.post(`/v1/containers/${n('api')}/upgrade`, {
      image: 'spcd-demo/service:crash',
      expectedGeneration: before.generation,
    });
    expect((await tap!.finished(op, 90_000)).phase).toBe('failed');
    const images = { [n('db')]: 'spcd-demo/service:2', [n('api')]: 'spcd-demo/service:2' };
    const a = await upgradeSet(ctl, 'ctl', images, 120_000);
    expect(a.spcd).toMatch(/^set=ctl first_stop_to_done_s=[\d.]+ /);
    // depends_on order: db first, then api; each with its own figures.
    expect(a.spcd.indexOf(`${n('db')}:spcd-demo/service:1->`)).toBeGreaterThan(0);
    expect(a.spcd.indexOf(`${n('db')}:`)).toBeLessThan(a.spcd.indexOf(`${n('api')}:`));
    expect(a.spcd.match(/stop_to_healthy_s=/g)?.length).toBe(2);
    // The first member's stop opens the step; the last one's is when the whole set had changed.
    const stops = tap!.events.filter(
      (e) => e.type === 'upgrade-step' && e.step === 'stop-old' && e.outcome === 'begin',
    );
    expect(a.upSince).toBe(stops.at(-1)!.at);
    expect(a.upSince!).toBeGreaterThan(a.stopAt);
    expect((await api.container(n('api'))).generation).toBe(before.generation + 2);
  }, 240_000);
});
