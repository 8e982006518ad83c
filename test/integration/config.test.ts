import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inOrder } from '../support/in-order.js';
import { demoContainerYaml, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, containersOf, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('config');
const n = (s: string): string => `${sb.instance}-${s}`;
const templates = join(sb.root, 'templates');
const globals = join(sb.root, 'globals.yaml');
const configRoot = join(sb.root, 'config');
const secrets = join(sb.root, 'secrets.yaml');

const configured = (c: string): string[] => [
  'stop_grace_period: 1s',
  'config:',
  `  - { template: ${c}.conf.j2, dest: ${c}.conf, container_path: /etc/${c}/${c}.conf, mode: '0644' }`,
];
const SET = [
  '',
  'set: cfg',
  'defaults: { level: 0, other: a }',
  'containers:',
  demoContainerYaml(n('a'), configured('a')) +
    demoContainerYaml(n('b'), configured('b')) +
    demoContainerYaml(n('c'), ['stop_grace_period: 1s']),
].join('\n');

let spcd: SpcdProcess;

const started = async (s: string): Promise<string> => (await inspect(n(s)))!.State.StartedAt;
const generation = async (s: string): Promise<string | undefined> =>
  (await inspect(n(s)))?.Config.Labels['spcd.generation'];
function snapshotConfig(): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out[p.slice(configRoot.length)] = readFileSync(p, 'utf8');
    }
  };
  walk(configRoot);
  return out;
}
const reloadOutcome = async (count: number): Promise<string> =>
  waitFor(`reload #${count}`, () => {
    const lines = spcd.output.filter(
      (l) => l.includes('"kind":"reload"') && /operation (succeeded|failed)/.test(l),
    );
    return lines.length >= count ? lines[count - 1] : undefined;
  });

beforeAll(async () => {
  mkdirSync(templates);
  writeFileSync(join(templates, 'a.conf.j2'), '[DEFAULT]\nlevel = {{ level }}\npassword = {{ pw }}\n');
  writeFileSync(secrets, 'pw: s3cr3t-value\n', { mode: 0o600 });
  writeFileSync(join(templates, 'b.conf.j2'), '[DEFAULT]\nother = {{ other }}\n');
  writeFileSync(globals, 'level: 1\nother: x\n');
  writeSet(sb, 'cfg.yaml', SET);
  spcd = SpcdProcess.start(sb, [
    '--templates',
    templates,
    '--globals',
    globals,
    '--secrets',
    secrets,
    '--config-root',
    configRoot,
  ]);
  await spcd.ready();
  await waitFor('three running', async () =>
    (await Promise.all(['a', 'b', 'c'].map((s) => inspect(n(s))))).every((c) => c?.State.Running),
  );
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('config rendering and reconfigure on a real engine', () => {
  inOrder();
  it('mounts the rendered config read-only at kolla’s path with KOLLA_CONFIG_STRATEGY', async () => {
    const out = execFileSync(
      '/usr/bin/docker',
      ['exec', n('a'), 'cat', '/var/lib/kolla/config_files/a.conf'],
      { encoding: 'utf8' },
    );
    expect(out).toBe('[DEFAULT]\nlevel = 1\npassword = s3cr3t-value\n');
    const json = JSON.parse(
      execFileSync('/usr/bin/docker', ['exec', n('a'), 'cat', '/var/lib/kolla/config_files/config.json'], {
        encoding: 'utf8',
      }),
    ) as { command: string; config_files: { dest: string; perm: string }[] };
    expect(json.command).toBe('demo-service sleep');
    expect(json.config_files[0]).toMatchObject({ dest: '/etc/a/a.conf', perm: '0644' });
    const c = await inspect(n('a'));
    expect((c as unknown as { Config: { Env: string[] } }).Config.Env).toContain(
      'KOLLA_CONFIG_STRATEGY=COPY_ALWAYS',
    );
    expect(c!.HostConfig.Binds).toContain(`${configRoot}/${n('a')}/current:/var/lib/kolla/config_files:ro`);
    expect(c!.Config.Labels['spcd.config-hash']).toMatch(/^v1-/);
    expect((await inspect(n('c')))!.Config.Labels['spcd.config-hash']).toBe('none');
  });

  it('a changed global restarts exactly the containers whose files change', async () => {
    const before = { b: await started('b'), c: await started('c') };
    writeFileSync(globals, 'level: 2\nother: x\n');
    // Before anything happens, the plan names exactly the container whose files change, with a masked diff.
    const planText = execFileSync('curl', ['-sf', '--unix-socket', sb.socket, 'http://spcd/v1/plan'], {
      encoding: 'utf8',
    });
    const plan = JSON.parse(planText) as {
      items: { container: string; action: string; fileDiffs?: { file: string; diff: string }[] }[];
    };
    expect(plan.items.map((i) => [i.container, i.action])).toEqual([[n('a'), 'recreate']]);
    const diff = plan.items[0]!.fileDiffs!.find((d) => d.file === 'a.conf')!.diff;
    expect(diff).toContain('-level = 1');
    expect(diff).toContain('+level = 2');
    expect(planText).not.toContain('s3cr3t-value');
    expect(await started('b')).toBe(before.b);
    spcd.child.kill('SIGHUP');
    expect(await reloadOutcome(1)).toContain('operation succeeded');
    await waitFor(
      'a at generation 2, old one gone',
      async () => (await generation('a')) === '2' && (await containersOf(sb.instance)).length === 3,
      {
        timeoutMs: 20_000,
      },
    );
    const out = execFileSync(
      '/usr/bin/docker',
      ['exec', n('a'), 'cat', '/var/lib/kolla/config_files/a.conf'],
      { encoding: 'utf8' },
    );
    expect(out).toBe('[DEFAULT]\nlevel = 2\npassword = s3cr3t-value\n');
    expect(await started('b')).toBe(before.b);
    expect(await started('c')).toBe(before.c);
    expect(await generation('b')).toBe('1');
  });

  it('a failing render is refused with template and line, and leaves every file identical', async () => {
    const files = snapshotConfig();
    const before = { a: await started('a'), b: await started('b') };
    writeFileSync(join(templates, 'b.conf.j2'), '[DEFAULT]\nother = {{ other }}\nmissing = {{ nope }}\n');
    spcd.child.kill('SIGHUP');
    const line = await reloadOutcome(2);
    expect(line).toContain('operation failed');
    expect(line).toMatch(/b\.conf\.j2/);
    expect(line).toMatch(/line 3|:3/);
    expect(snapshotConfig()).toEqual(files);
    expect(await started('a')).toBe(before.a);
    expect(await started('b')).toBe(before.b);
    writeFileSync(join(templates, 'b.conf.j2'), '[DEFAULT]\nother = {{ other }}\n');
  });

  it('a bootstrap task that fails blocks its service with the reason, and one that succeeds keeps its output', async () => {
    writeSet(
      sb,
      'boot.yaml',
      [
        '',
        'set: boot',
        'containers:',
        demoContainerYaml(n('ok'), [
          'stop_grace_period: 1s',
          'bootstrap:',
          `  - { name: db_sync, command: [sh, -c, 'printf "synced \\033[1mschema 42\\n"'], timeout: 20s }`,
        ]) +
          demoContainerYaml(n('bad'), [
            'bootstrap:',
            "  - { name: db_sync, command: [sh, -c, 'echo cannot reach db; exit 3'], timeout: 20s }",
          ]) +
          demoContainerYaml(n('slow'), [
            'bootstrap:',
            "  - { name: db_sync, command: [sleep, '3600'], timeout: 1s }",
          ]),
      ].join('\n'),
    );
    spcd.child.kill('SIGHUP');
    await waitFor('ok running', async () => (await inspect(n('ok')))?.State.Running, { timeoutMs: 20_000 });
    await waitFor(
      'bad refused',
      () => spcd.output.find((l) => l.includes('BOOTSTRAP_FAILED') && l.includes(n('bad'))),
      {
        timeoutMs: 20_000,
      },
    );
    await waitFor(
      'slow timed out',
      () => spcd.output.find((l) => l.includes('BOOTSTRAP_FAILED') && l.includes('timed out')),
      {
        timeoutMs: 20_000,
      },
    );
    const badLine = spcd.output.find((l) => l.includes('BOOTSTRAP_FAILED') && l.includes(n('bad')))!;
    expect(badLine).toContain('exited with 3');
    expect(await inspect(n('bad'))).toBeUndefined();
    expect(await inspect(n('slow'))).toBeUndefined();
    // no task container is left behind
    const names = (await containersOf(sb.instance)).map((c) => c.Names[0]);
    expect(names.filter((x) => x?.includes('.task-'))).toEqual([]);
    const state = JSON.parse(readFileSync(join(sb.stateDir, 'state.json'), 'utf8')) as {
      containers: Record<
        string,
        { generations: { bootstrap?: { name: string; exitCode: number; output: string }[] }[] }
      >;
    };
    const okGen = state.containers[n('ok')]!.generations[0]!;
    // container output is kept with its control characters escaped
    expect(okGen.bootstrap).toEqual([{ name: 'db_sync', exitCode: 0, output: 'synced \\x1b[1mschema 42' }]);
  });
});
