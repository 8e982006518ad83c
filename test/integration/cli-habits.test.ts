import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerationDiffView } from '../../agent/api/types.js';
import { REPO, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, containersOf, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * spcctl as an operator runs it (bin/spcctl.js) against a real daemon: one
 * upgrade of a container with config (image, an environment variable and a
 * rendered value change), then `generations NAME --diff 1 2`, the -o forms,
 * and bash completing the container's name live from the daemon.
 */
const run = promisify(execFile);
const sb: Sandbox = sandbox('clihabits');
const name = `${sb.instance}-svc`;
const templates = join(sb.root, 'templates');
const globals = join(sb.root, 'globals.yaml');
const secrets = join(sb.root, 'secrets.yaml');
const spcctlBin = join(REPO, 'bin', 'spcctl.js');
let spcd: SpcdProcess | undefined;

const setYaml = (image: string, env: string): string => `
set: habits
containers:
  ${name}:
    image: ${image}
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
    environment: { ${env} }
    config:
      - { template: svc.conf.j2, dest: svc.conf, container_path: /etc/svc/svc.conf, mode: '0644' }
`;

async function spcctl(args: string[]): Promise<{ code: number; out: string; err: string }> {
  try {
    const r = await run(spcctlBin, ['--socket', sb.socket, ...args], { encoding: 'utf8', timeout: 60_000 });
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: x.code ?? -1, out: x.stdout ?? '', err: x.stderr ?? '' };
  }
}

beforeAll(async () => {
  mkdirSync(templates);
  writeFileSync(join(templates, 'svc.conf.j2'), '[DEFAULT]\nlevel = {{ level }}\npassword = {{ pw }}\n');
  writeFileSync(globals, 'level: 1\n');
  writeFileSync(secrets, 'pw: hunter2-secret\n', { mode: 0o600 });
  writeSet(sb, 'habits.yaml', setYaml('spcd-demo/service:1', 'MODE: a'));
  spcd = SpcdProcess.start(sb, [
    '--templates',
    templates,
    '--globals',
    globals,
    '--secrets',
    secrets,
    '--config-root',
    join(sb.root, 'config'),
  ]);
  await spcd.ready();
  await waitFor('generation 1 running', async () => (await inspect(name))?.State.Running);
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('spcctl habits against a real daemon', () => {
  it('generations NAME --diff 1 2 after one upgrade: image, digest, spec fields, config files with their diff', async () => {
    writeSet(sb, 'habits.yaml', setYaml('spcd-demo/service:2', 'MODE: b, EXTRA: "1"'));
    writeFileSync(globals, 'level: 2\n');
    const reload = await spcctl(['reload', '--wait']);
    expect(reload.code, reload.err).toBe(0);
    await waitFor(
      'generation 2 running alone',
      async () => {
        const c = await inspect(name);
        return (
          c?.State.Running &&
          c.Config.Labels['spcd.generation'] === '2' &&
          (await containersOf(sb.instance)).length === 1
        );
      },
      { timeoutMs: 60_000 },
    );
    await waitFor('generation 2 committed', async () => {
      const g = load((await spcctl(['generations', name, '-o', 'yaml'])).out) as {
        generations: { generation: number; outcome: string }[];
      };
      return g.generations.find((x) => x.generation === 2)?.outcome === 'current';
    });

    const human = await spcctl(['generations', name, '--diff', '1', '2']);
    expect(human.code, human.err).toBe(0);
    const lines = human.out.split('\n');
    expect(lines[0]).toBe(`${name}: generation 1 -> 2`);
    expect(lines[1]).toBe('image:   spcd-demo/service:1 -> spcd-demo/service:2');
    // locally built images carry no registry digest: the digest line shows only when they differ
    const gens = JSON.parse((await spcctl(['generations', name, '-o', 'json'])).out) as {
      generations: { generation: number; imageDigest: string | null }[];
    };
    const digest = (n: number): string | null =>
      gens.generations.find((g) => g.generation === n)?.imageDigest ?? null;
    if (digest(1) === digest(2)) expect(human.out).not.toMatch(/^digest:/m);
    else expect(lines[2]).toBe(`digest:  ${digest(1) ?? '-'} -> ${digest(2) ?? '-'}`);
    expect(human.out).toContain(
      '\nspec:\n  environment.EXTRA: (absent) -> "1"\n  environment.MODE: "a" -> "b"\n',
    );
    // the image is said once, on its own line (the JSON form lists it among the spec fields too)
    expect(human.out).not.toContain('  image: "spcd-demo/service:1"');
    expect(human.out).toMatch(/\nconfig: {2}v1-[0-9a-f]+ -> v1-[0-9a-f]+\n/);
    expect(human.out).toMatch(/^ {2}modified {2}svc\.conf {2}[0-9a-f]{12} -> [0-9a-f]{12}$/m);
    // both versions are still on disk (current and previous): the rendered diff, secret masked
    expect(human.out).toContain('--- a/svc.conf\n+++ b/svc.conf\n');
    expect(human.out).toContain('-level = 1\n+level = 2\n');
    expect(human.out).toContain(' password = ******');
    expect(human.out).not.toContain('hunter2-secret');

    const json = await spcctl(['generations', name, '--diff', '1', '2', '-o', 'json']);
    const d = JSON.parse(json.out) as GenerationDiffView;
    expect(d.from.generation).toBe(1);
    expect(d.to.generation).toBe(2);
    expect(d.config).toMatchObject({ changed: true, filesKnown: true });
    expect(d.config.files.find((f) => f.path === 'svc.conf')).toMatchObject({ change: 'modified' });
    expect(d.spec.map((c) => c.path)).toEqual(['environment.EXTRA', 'environment.MODE', 'image']);
    // each generation recorded its files' digests in state.json
    const state = JSON.parse(readFileSync(join(sb.stateDir, 'state.json'), 'utf8')) as {
      containers: Record<string, { generations: { configFiles?: { path: string; sha256: string }[] }[] }>;
    };
    const recorded = state.containers[name]!.generations.map((g) => g.configFiles?.map((f) => f.path));
    expect(recorded).toEqual([
      ['config.json', 'svc.conf'],
      ['config.json', 'svc.conf'],
    ]);
    const svc = d.config.files.find((f) => f.path === 'svc.conf')!;
    expect(state.containers[name]!.generations[1]!.configFiles).toContainEqual({
      path: 'svc.conf',
      sha256: svc.toSha256,
    });
    expect(json.out).not.toContain('hunter2-secret');
    const yaml = await spcctl(['generations', name, '--diff', '1', '2', '-o', 'yaml']);
    expect(load(yaml.out)).toEqual(d);

    const gone = await spcctl(['generations', name, '--diff', '1', '5']);
    expect(gone).toMatchObject({ code: 4 });
    expect(gone.err).toBe(`spcctl: NOT_FOUND: container ${name} has no generation 5 (kept: 1, 2)\n`);
  });

  it('-o wide and -o yaml on the listings; a bad -o names the flag', async () => {
    const wide = await spcctl(['ps', '-o', 'wide']);
    const row = wide.out.split('\n').find((l) => l.startsWith(name));
    const c = (await inspect(name))!;
    expect(row).toContain(c.Id.slice(0, 12));
    const st = load((await spcctl(['status', '-o', 'yaml'])).out) as { instance: string };
    expect(st.instance).toBe(sb.instance);
    expect(await spcctl(['ps', '-o', 'table'])).toMatchObject({
      code: 2,
      err: 'spcctl: --output: unknown format "table" (expected one of: json, yaml, wide)\n',
    });
  });

  it('bash completes the container name live from the daemon, and nothing when it does not answer', async () => {
    const script = (await spcctl(['completion', 'bash'])).out;
    const file = join(sb.root, 'spcctl.bash');
    writeFileSync(file, script);
    const complete = async (socket: string): Promise<string[]> => {
      const r = await run(
        'bash',
        [
          '--norc',
          '-c',
          'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _spcctl; printf "%s\\n" "${COMPREPLY[@]}"',
          'bash',
          file,
          spcctlBin,
          '--socket',
          socket,
          'health',
          name.slice(0, -2),
        ],
        { encoding: 'utf8', timeout: 30_000 },
      );
      return r.stdout.split('\n').filter((l) => l !== '');
    };
    expect(await complete(sb.socket)).toEqual([name]);
    expect(await complete(join(sb.root, 'nobody.sock'))).toEqual([]);
  });
});
