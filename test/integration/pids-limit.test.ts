import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { execIn } from '../support/containers.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * pids_limit, the option added through the field table alone: from the YAML
 * key through spcd's reader, hash and create body to the engine and the
 * kernel's pids cgroup of a real container.
 */
const sb: Sandbox = sandbox('pids');
const n = (s: string): string => `${sb.instance}-${s}`;
let spcd: SpcdProcess | undefined;

beforeAll(async () => {
  writeSet(
    sb,
    'app.yaml',
    `set: app
containers:
  ${n('limited')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    pids_limit: 48
    stop_grace_period: 1s
  ${n('free')}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
`,
  );
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
  await waitFor(
    'both containers running',
    async () =>
      (await inspect(n('limited')))?.State.Running === true &&
      (await inspect(n('free')))?.State.Running === true,
    { timeoutMs: 30_000 },
  );
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

/** pids.max of the container's cgroup (v2 unified, or the v1 pids hierarchy). */
async function pidsMax(name: string): Promise<string> {
  const r = await execIn(n(name), [
    'sh',
    '-c',
    'cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max',
  ]);
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout.trim();
}

describe('pids_limit', () => {
  it('reaches the engine and the pids cgroup; a container without it keeps the engine default', async () => {
    const limited = await inspect(n('limited'));
    expect(limited?.HostConfig.PidsLimit).toBe(48);
    expect(await pidsMax('limited')).toBe('48');
    const free = await inspect(n('free'));
    expect(free?.HostConfig.PidsLimit ?? null).not.toBe(48);
    expect(await pidsMax('free')).not.toBe('48');
  });
});
