import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { SocketProxy } from '../support/socket-proxy.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('outage');
const n = (s: string): string => `${sb.instance}-${s}`;
const proxy = new SocketProxy(join(sb.root, 'docker.sock'));
let spcd: SpcdProcess;

const status = (): {
  engine: { available: boolean };
  sets: { containers: { name: string; state: string }[] }[];
} =>
  JSON.parse(
    execFileSync('curl', ['-sf', '--unix-socket', sb.socket, 'http://spcd/v1/status'], { encoding: 'utf8' }),
  );

beforeAll(async () => {
  await proxy.up();
  writeSet(
    sb,
    'o.yaml',
    `set: o\ncontainers:\n${demoContainerYaml(n('a'), ['stop_grace_period: 1s'])}${demoContainerYaml(n('b'), ['stop_grace_period: 1s'])}`,
  );
  spcd = SpcdProcess.start(sb, ['--docker-socket', proxy.path]);
  await spcd.ready();
  await waitFor(
    'both running',
    async () => (await inspect(n('a')))?.State.Running && (await inspect(n('b')))?.State.Running,
  );
});

afterAll(async () => {
  await spcd?.stop();
  await proxy.down();
  await cleanupInstance(sb.instance);
});

describe('engine outage', () => {
  it('reports the engine unavailable, acts on nothing, and resumes without recreating', async () => {
    const before = {
      a: (await inspect(n('a')))!.State.StartedAt,
      b: (await inspect(n('b')))!.State.StartedAt,
    };
    await proxy.down(); // the event stream is cut too
    await waitFor('engine reported unavailable', () => !status().engine.available, { timeoutMs: 15_000 });
    expect(status().sets[0]!.containers.map((c) => c.state)).toEqual(['unknown', 'unknown']);
    // While spcd cannot see the engine, a container really exits: spcd must not act (it cannot), nor misread the cut.
    execFileSync('/usr/bin/docker', ['kill', n('b')]);
    expect(spcd.logged('"to":"exited"')).toBe(false);
    await proxy.up();
    await waitFor('engine available again', () => status().engine.available, { timeoutMs: 15_000 });
    // a was running throughout: adopted as is. b really exited: restarted once the engine answered.
    await waitFor('b restarted', async () => (await inspect(n('b')))?.State.Running, { timeoutMs: 15_000 });
    expect((await inspect(n('a')))!.State.StartedAt).toBe(before.a);
    expect((await inspect(n('a')))!.Config.Labels['spcd.generation']).toBe('1');
    expect((await inspect(n('b')))!.Config.Labels['spcd.generation']).toBe('1');
    expect((await inspect(n('b')))!.State.StartedAt).not.toBe(before.b);
  });
});
