import { execFileSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect, ENGINE_CLI } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * spcd restarts (a reboot, an upgrade of spcd) while its definitions or
 * secrets cannot be read: it comes up anyway, keeps what runs (restarting
 * what exits, creating, replacing and removing nothing), says why in its
 * status and log, and applies the definitions at the reload that reads them.
 */
const sb: Sandbox = sandbox('bootdefs');
const n = (s: string): string => `${sb.instance}-${s}`;
const secrets = join(sb.root, 'secrets.yaml');
let spcd: SpcdProcess | undefined;

interface Status {
  definitions?: {
    loaded: boolean;
    error?: { code: string; message: string; problems?: { file: string; line: number }[] };
  };
  sets: unknown[];
  retained?: { name: string; state: string; generation: number }[];
}
const status = (): Status =>
  JSON.parse(
    execFileSync('curl', ['-sf', '--unix-socket', sb.socket, 'http://spcd/v1/status'], { encoding: 'utf8' }),
  ) as Status;

const container = (name: string, extra = ''): string =>
  `${demoContainerYaml(n(name), ['stop_grace_period: 1s'])}${extra}`;
const A_GOOD = `set: ha\ncontainers:\n${container('a')}`;
const A_BROKEN = `set: ha\ncontainers:\n${container('a')}  ${n('x')}: [unclosed\n`;
const B_V1 = `set: hb\ncontainers:\n${container('b')}`;
const B_V2 = `set: hb\ncontainers:\n${container('b', '    environment:\n      CHANGED: "yes"\n')}`;

const startSpcd = async (): Promise<SpcdProcess> => {
  const p = SpcdProcess.start(sb, ['--secrets', secrets]);
  spcd = p;
  await p.ready();
  return p;
};
const started = async (name: string): Promise<string> => (await inspect(n(name)))!.State.StartedAt;

beforeAll(async () => {
  writeFileSync(secrets, 'token: s3cret\n', { mode: 0o600 });
  chmodSync(secrets, 0o600);
  writeSet(sb, 'a.yaml', A_GOOD);
  writeSet(sb, 'b.yaml', B_V1);
  await startSpcd();
  await waitFor(
    'a and b running',
    async () => (await inspect(n('a')))?.State.Running && (await inspect(n('b')))?.State.Running,
  );
  expect(status().definitions).toEqual({ loaded: true });
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('definitions that cannot be read at start', () => {
  it('bad YAML: up anyway, keeps and heals what runs, applies the definitions once a SIGHUP reads them', async () => {
    expect(await spcd!.stop()).toBe(0);
    const before = { a: await started('a'), b: await started('b') };
    writeSet(sb, 'a.yaml', A_BROKEN);
    // A change beside the broken file: not applied while the definitions as a whole cannot be read.
    writeSet(sb, 'b.yaml', B_V2);
    const p = await startSpcd();
    expect(p.logged('definitions not loaded')).toBe(true);
    const s = status();
    expect(s.definitions?.loaded).toBe(false);
    expect(s.definitions?.error?.code).toBe('SPEC_YAML');
    expect(s.definitions?.error?.problems?.[0]?.file).toContain('a.yaml');
    expect(s.definitions?.error?.problems?.[0]?.line).toBeGreaterThan(0);
    expect(p.output.some((l) => /a\.yaml:\d+:/.test(l))).toBe(true);
    await waitFor('both kept and seen running', () => {
      const r = status().retained ?? [];
      return r.filter((c) => c.state === 'running').length === 2;
    });
    // Untouched: b is not recreated for its change, nothing is removed.
    expect(await started('a')).toBe(before.a);
    expect(await started('b')).toBe(before.b);
    expect((await inspect(n('b')))!.Config.Labels['spcd.generation']).toBe('1');

    // No new generation while kept: an upgrade is refused, naming why.
    const refused = execFileSync(
      'curl',
      [
        '-s',
        '--unix-socket',
        sb.socket,
        '-X',
        'POST',
        '-H',
        'content-type: application/json',
        '-d',
        JSON.stringify({ image: 'spcd-demo/service:2' }),
        '-w',
        '\n%{http_code}',
        `http://spcd/v1/containers/${n('b')}/upgrade`,
      ],
      { encoding: 'utf8' },
    ).split('\n');
    expect(refused[1]).toBe('409');
    expect(JSON.parse(refused[0]!).code).toBe('DEFINITIONS_NOT_LOADED');

    // A kept container that dies is restarted, as it is.
    execFileSync(ENGINE_CLI, ['kill', n('a')]);
    await waitFor(
      'a restarted',
      async () => {
        const a = await inspect(n('a'));
        return a?.State.Running && a.State.StartedAt !== before.a;
      },
      { timeoutMs: 30_000 },
    );
    expect((await inspect(n('a')))!.Config.Labels['spcd.generation']).toBe('1');
    expect(await started('b')).toBe(before.b);

    // Fixed on disk, then SIGHUP: applied (b gets its new generation), what runs is no longer kept.
    writeSet(sb, 'a.yaml', A_GOOD);
    p.child.kill('SIGHUP');
    await waitFor('definitions loaded', () => status().definitions?.loaded === true);
    await waitFor(
      'b recreated with its change',
      async () => (await inspect(n('b')))?.Config.Labels['spcd.generation'] === '2',
      { timeoutMs: 60_000 },
    );
    const env = execFileSync(ENGINE_CLI, ['inspect', '-f', '{{json .Config.Env}}', n('b')], {
      encoding: 'utf8',
    });
    expect(JSON.parse(env)).toContain('CHANGED=yes');
    expect((await inspect(n('a')))!.Config.Labels['spcd.generation']).toBe('1');
    expect(status().retained ?? []).toEqual([]);
  });

  it('an insecure secrets file: up anyway, keeping what runs; chmod 0600 and SIGHUP applies', async () => {
    expect(await spcd!.stop()).toBe(0);
    const before = { a: await started('a'), b: await started('b') };
    chmodSync(secrets, 0o644);
    writeSet(sb, 'b.yaml', B_V1);
    const p = await startSpcd();
    const s = status();
    expect(s.definitions?.loaded).toBe(false);
    expect(s.definitions?.error?.code).toBe('SECRETS_INSECURE');
    expect(s.definitions?.error?.message).toContain(secrets);
    await waitFor('both kept and seen running', () => {
      const r = status().retained ?? [];
      return r.filter((c) => c.state === 'running').length === 2;
    });
    expect(await started('b')).toBe(before.b);
    expect((await inspect(n('b')))!.Config.Labels['spcd.generation']).toBe('2');
    chmodSync(secrets, 0o600);
    p.child.kill('SIGHUP');
    await waitFor('definitions loaded', () => status().definitions?.loaded === true);
    await waitFor(
      'b back to its first definition',
      async () => (await inspect(n('b')))?.Config.Labels['spcd.generation'] === '3',
      { timeoutMs: 60_000 },
    );
    expect(await started('a')).toBe(before.a);
  });
});
