/**
 * A bootstrap task that starts through the image's own kolla_start: no
 * command of its own, KOLLA_BOOTSTRAP in its environment. Kolla's
 * kolla_set_configs runs first (the config file lands with its owner and
 * mode), then the image's kolla_extend_start sees KOLLA_BOOTSTRAP and does the
 * one-shot work instead of the service. Uses spcd-e2e/kolla-runtime:bookworm
 * (Kolla's start.sh and set_configs.py from ../shared; global setup builds it).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('kolla-boot');
const n = (s: string): string => `${sb.instance}-${s}`;
const templates = join(sb.root, 'templates');
let spcd: SpcdProcess;

beforeAll(async () => {
  mkdirSync(templates);
  writeFileSync(join(templates, 'demo.conf.j2'), '[DEFAULT]\nlevel = {{ level }}\n');
  writeSet(
    sb,
    'kb.yaml',
    `
set: kb
defaults: { level: 3 }
containers:
  ${n('svc')}:
    image: spcd-e2e/kolla-runtime:bookworm
    command: [sleep, infinity]
    network: none
    stop_grace_period: 1s
    config:
      - { template: demo.conf.j2, dest: demo.conf, container_path: /etc/demo/demo.conf, owner: nova, mode: '0640' }
    bootstrap:
      - name: db-sync
        environment: { KOLLA_BOOTSTRAP: '', KOLLA_BOOTSTRAP_SHOW: /etc/demo/demo.conf }
        timeout: 30s
`,
  );
  spcd = SpcdProcess.start(sb, ['--templates', templates, '--config-root', join(sb.root, 'config')]);
  await spcd.ready();
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('a bootstrap task through kolla_start', () => {
  it('runs kolla_set_configs, then the image sees KOLLA_BOOTSTRAP; the service then starts normally', async () => {
    await waitFor('the service running', async () => (await inspect(n('svc')))?.State.Running, {
      timeoutMs: 90_000,
    });
    const state = JSON.parse(readFileSync(join(sb.stateDir, 'state.json'), 'utf8')) as {
      containers: Record<
        string,
        { generations: { bootstrap?: { name: string; exitCode: number; output: string }[] }[] }
      >;
    };
    const task = state.containers[n('svc')]!.generations[0]!.bootstrap?.[0];
    expect(task).toMatchObject({ name: 'db-sync', exitCode: 0 });
    const out = task!.output.split('\n');
    expect(out).toContain("bootstrap: command 'sleep infinity'");
    expect(out).toContain('bootstrap: /etc/demo/demo.conf nova:nova 640');
    // The service itself: kolla_start exec'd config.json's command, without KOLLA_BOOTSTRAP.
    const env = JSON.parse(
      execFileSync('/usr/bin/docker', ['inspect', '-f', '{{json .Config.Env}}', n('svc')], {
        encoding: 'utf8',
      }),
    ) as string[];
    expect(env).toContain('KOLLA_CONFIG_STRATEGY=COPY_ALWAYS');
    expect(env.filter((e) => e.startsWith('KOLLA_BOOTSTRAP'))).toEqual([]);
    const pid1 = (): string =>
      execFileSync('/usr/bin/docker', ['exec', n('svc'), 'cat', '/proc/1/cmdline'], { encoding: 'utf8' })
        .split('\0')
        .filter(Boolean)
        .join(' ');
    // kolla_start (bash) runs kolla_set_configs first, then execs the command in its place.
    expect(await waitFor('kolla_start to exec the command', () => pid1() === 'sleep infinity')).toBe(true);
  });
});
