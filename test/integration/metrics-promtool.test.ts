/**
 * The real `promtool check metrics` on a live daemon's /metrics, running the
 * demo set (container-sets/demo/demo.yaml, its names and paths made unique
 * to this test, with a dependency check added), after an upgrade that
 * commits and one that rolls back.
 */
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capsOverride, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { BundledDemo } from '../support/demo-set.js';
import { cleanupInstance } from '../support/docker.js';
import { freePort } from '../support/ports.js';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);
const sb: Sandbox = sandbox('prom');
const name = (s: string): string => `${sb.instance}-${s}`;
let spcd: SpcdProcess;

async function curl(method: string, path: string, body?: unknown): Promise<string> {
  const args = ['-sf', '--unix-socket', sb.socket, '-X', method];
  if (body !== undefined) args.push('-H', 'content-type: application/json', '-d', JSON.stringify(body));
  const { stdout } = await run('curl', [...args, `http://spcd${path}`], { maxBuffer: 8 * 1024 * 1024 });
  return stdout;
}

/** promtool check metrics, the exposition on its stdin. */
function promtool(text: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.stderr.on('data', (b: Buffer) => (out += b.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, out }));
    p.stdin.end(text);
  });
}

beforeAll(async () => {
  const port = await freePort();
  const closed = await freePort();
  const demo = BundledDemo.create(sb, port)
    .read('container-sets/demo/demo.yaml')
    // A dependency check on a port nothing listens on: spcd_check_dependency_up has a sample (0).
    .replace(
      /( +)- name: api\n/,
      (m, pad: string) =>
        `${pad}- { name: mq, tcp: "127.0.0.1:${closed}", interval: 1s, timeout: 500ms, failure_threshold: 1, dependency: rabbitmq }\n${m}`,
    );
  expect(demo).toContain('dependency: rabbitmq');
  writeSet(sb, 'demo.yaml', demo);
  // This VM cannot start --privileged containers (docs/how-to/operate-a-host.md).
  const overrides = capsOverride(sb, [name('libvirt')]);
  spcd = SpcdProcess.start(sb, ['--overrides', overrides, '--gate-deadline', '20s']);
  await spcd.ready(60_000);
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('/metrics of a live daemon with the demo set', () => {
  it('passes promtool check metrics, with upgrade outcomes counted', async () => {
    const ovs = name('ovs_agent');
    await waitFor(
      'the demo set running',
      async () =>
        (await curl('GET', '/metrics'))
          .split('\n')
          .filter((l) => l.startsWith('spcd_container_state{') && l.includes('state="running"} 1')).length ===
        3,
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    await curl('POST', `/v1/containers/${ovs}/upgrade`, { image: 'spcd-demo/service:2' });
    const committed = `spcd_upgrades_total{container="${ovs}",kind="upgrade",outcome="succeeded"} 1`;
    await waitFor('the upgrade counted', async () => (await curl('GET', '/metrics')).includes(committed), {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    await curl('POST', `/v1/containers/${ovs}/upgrade`, { image: 'spcd-demo/service:crash' });
    const rolledBack = `spcd_upgrades_total{container="${ovs}",kind="upgrade",outcome="rolled_back"} 1`;
    await waitFor('the rollback counted', async () => (await curl('GET', '/metrics')).includes(rolledBack), {
      timeoutMs: 60_000,
      intervalMs: 250,
    });

    // The dependency check's sample exists once it has a verdict (a new watch starts it jittered).
    const dependencyDown = `spcd_check_dependency_up{container="${name('compute')}",check="mq",dependency="rabbitmq"} 0`;
    await waitFor(
      'the dependency sample',
      async () => (await curl('GET', '/metrics')).includes(dependencyDown),
      {
        timeoutMs: 60_000,
        intervalMs: 250,
      },
    );
    const text = await curl('GET', '/metrics');
    const checked = await promtool(text);
    expect(checked.out).toBe('');
    expect(checked.code).toBe(0);
    for (const family of [
      'spcd_engine_available 1',
      'spcd_definitions_loaded 1',
      'spcd_quarantined_containers 0',
      `spcd_container_generation{container="${ovs}",set="demo/network"} 2`,
      `spcd_container_health{container="${name('compute')}",set="demo",health="healthy"}`,
      '# TYPE spcd_vm_safety_refusals_total counter',
      '# TYPE spcd_health_check_failures_total counter',
      '# TYPE spcd_api_request_duration_seconds histogram',
      `spcd_check_dependency_up{container="${name('compute')}",check="mq",dependency="rabbitmq"} 0`,
    ])
      expect(text).toContain(family);
    // promtool is strict enough to catch a broken exposition (the check is not vacuous)
    const broken = await promtool(text + '# TYPE spcd_engine_available gauge\nspcd_engine_available 1\n');
    expect(broken.code).not.toBe(0);
  });
});
