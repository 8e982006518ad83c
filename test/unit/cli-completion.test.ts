import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHandler } from '../../agent/api/handler.js';
import { COMMANDS } from '../../agent/cli/args.js';
import { bashScript, zshScript } from '../../agent/cli/completion.js';
import { silentLogger } from '../../agent/log.js';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';
import { serveOnTempSocket } from '../support/api-http.js';
import { runSpcctl } from '../support/cli-run.js';

const dir = mkdtempSync(join(tmpdir(), 'spcd-completion-'));
const bashFile = join(dir, 'spcctl.bash');
/** Stands in for spcctl in COMP_WORDS[0]: logs how it was called, prints three names (what `__complete containers` prints). */
const stub = join(dir, 'spcctl-stub');
const stubLog = join(dir, 'stub.log');

beforeAll(() => {
  writeFileSync(bashFile, bashScript());
  writeFileSync(
    stub,
    `#!/bin/sh\necho "$*" >> '${stubLog}'\nprintf 'nova_compute\\nneutron_agent\\ncron\\n'\n`,
  );
  chmodSync(stub, 0o755);
  mkdirSync(join(dir, 'sets-a'));
  mkdirSync(join(dir, 'sets-b'));
  writeFileSync(join(dir, 'settings.yaml'), '');
});

/** Runs bash's completion function on a command line whose last word is being completed. */
function bashComplete(words: string[], bin = 'spcctl'): string[] {
  const line = [bin, ...words];
  const script = [
    'source "$1"',
    'shift',
    'COMP_WORDS=("$@")',
    'COMP_CWORD=$(( $# - 1 ))',
    'COMP_LINE="$*"',
    '_spcctl',
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join('\n');
  const out = execFileSync('bash', ['--norc', '--noprofile', '-c', script, 'bash', bashFile, ...line], {
    encoding: 'utf8',
    cwd: dir,
  });
  return out.split('\n').filter((l) => l !== '');
}

describe('spcctl completion bash (run by a real bash)', () => {
  it('registers itself for spcctl and passes bash -n', () => {
    const r = spawnSync('bash', ['--norc', '-c', `source '${bashFile}' && complete -p spcctl`], {
      encoding: 'utf8',
    });
    expect(r.stdout.trim()).toBe('complete -F _spcctl spcctl');
    expect(spawnSync('bash', ['-n', bashFile]).status).toBe(0);
  });

  it('completes commands from the command table (the hidden helper is not offered)', () => {
    const visible = Object.entries(COMMANDS)
      .filter(([, d]) => !d.hidden)
      .map(([n]) => n)
      .sort();
    expect(bashComplete(['']).sort()).toEqual(visible);
    expect(bashComplete(['ge'])).toEqual(['generations']);
    expect(bashComplete(['re']).sort()).toEqual(['reload', 'restart']);
    // after a global option and its value the command is still the first word
    expect(bashComplete(['--socket', '/x.sock', 'sta'])).toEqual(['status', 'start']);
    expect(bashComplete(['-o', 'yaml', 'pl'])).toEqual(['plan']);
  });

  it("completes each command's own flags and the global ones", () => {
    expect(bashComplete(['upgrade', 'cron', '--']).sort()).toEqual(
      [
        '--expect-generation',
        '--help',
        '--image',
        '--json',
        '--output',
        '--read-only',
        '--readonly-socket',
        '--socket',
        '--timeout',
        '--wait',
      ].sort(),
    );
    expect(bashComplete(['generations', '--d'])).toEqual(['--diff']);
    expect(bashComplete(['logs', '-'])).toContain('-f');
    expect(bashComplete(['rollback', 'cron', '--f'])).toEqual(['--force']);
  });

  it('completes the values of -o with the forms the command prints', () => {
    expect(bashComplete(['status', '-o', ''])).toEqual(['json', 'yaml', 'wide']);
    expect(bashComplete(['health', 'cron', '--output', ''])).toEqual(['json', 'yaml']);
    expect(bashComplete(['ps', '-o', 'w'])).toEqual(['wide']);
    expect(bashComplete(['completion', ''])).toEqual(['bash', 'zsh']);
    // a value that is free text gets nothing
    expect(bashComplete(['upgrade', 'cron', '--image', ''])).toEqual([]);
  });

  it('completes container names live through `__complete containers`, passing --socket on', () => {
    writeFileSync(stubLog, '');
    expect(bashComplete(['restart', ''], stub)).toEqual(['nova_compute', 'neutron_agent', 'cron']);
    expect(bashComplete(['--socket', '/tmp/other.sock', 'logs', '-f', 'n'], stub)).toEqual([
      'nova_compute',
      'neutron_agent',
    ]);
    expect(readFileSync(stubLog, 'utf8').split('\n').filter(Boolean)).toEqual([
      '__complete containers',
      '--socket /tmp/other.sock __complete containers',
    ]);
    // only the first operand is a container; commands without one never ask the daemon
    expect(bashComplete(['generations', 'cron', '--diff', ''], stub)).toEqual([]);
    expect(bashComplete(['status', ''], stub)).toEqual([]);
    expect(readFileSync(stubLog, 'utf8').split('\n').filter(Boolean)).toHaveLength(2);
  });

  it('completes directories for validate and files for --overrides', () => {
    expect(bashComplete(['validate', 'sets-']).sort()).toEqual(['sets-a', 'sets-b']);
    expect(bashComplete(['validate', 'sets-a', '--overrides', 'sett'])).toEqual(['settings.yaml']);
  });
});

describe('__complete containers (the scripts’ helper)', () => {
  const status = new FakeStatus();
  let sock: string;
  let close: () => Promise<void>;
  beforeAll(async () => {
    const s = await serveOnTempSocket(
      createApiHandler({
        status,
        actions: new FakeActions(status),
        log: silentLogger(),
        version: '0.1.0-test',
        peerCred: () => null,
      }),
    );
    sock = s.socketPath;
    close = s.close;
  });
  afterAll(() => close());

  it('prints every container name, one a line', async () => {
    expect(await runSpcctl(['__complete', 'containers'], { SPCD_SOCKET: sock })).toEqual({
      code: 0,
      out: 'nova_compute\nneutron_agent\ncron\n',
      err: '',
    });
  });

  it('prints nothing and exits 0 when the daemon does not answer', async () => {
    expect(await runSpcctl(['--socket', join(dir, 'nobody.sock'), '__complete', 'containers'], {})).toEqual({
      code: 0,
      out: '',
      err: '',
    });
  });

  it('is left out of the usage text', async () => {
    const help = await runSpcctl(['--help'], {});
    expect(help.out).toContain('completion bash|zsh');
    expect(help.out).not.toContain('__complete');
  });
});

describe('spcctl completion zsh', () => {
  it('prints a zsh script made from the same table; a bad shell is a usage error', async () => {
    const z = await runSpcctl(['completion', 'zsh'], {});
    expect(z.code).toBe(0);
    expect(z.out).toBe(zshScript());
    expect(z.out.startsWith('#compdef spcctl\n')).toBe(true);
    expect(z.out).toContain(
      '    generations) flags=(--diff --socket --readonly-socket --read-only --json --output -o --help -h)',
    );
    expect(await runSpcctl(['completion', 'fish'], {})).toMatchObject({
      code: 2,
      err: 'spcctl: completion: unknown shell "fish" (expected bash or zsh)\n',
    });
  });

  // scripts/setup.sh installs zsh (scripts/ensure-zsh.sh): the test runs, never skips.
  const zsh = spawnSync('sh', ['-c', 'command -v zsh'], { encoding: 'utf8' }).stdout.trim();
  it('completes commands, flags, -o values and names in a real zsh', () => {
    if (zsh === '') throw new Error('zsh is not installed: run scripts/setup.sh (scripts/ensure-zsh.sh)');
    const file = join(dir, '_spcctl');
    writeFileSync(file, zshScript());
    // compadd and _files are stood in for by functions that print what they are given
    const drive = (words: string[], bin = 'spcctl'): string[] => {
      const script = [
        'compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }',
        '_files() { print -- "_files $*"; }',
        'compdef() { :; }',
        `source '${file}'`,
        `words=(${[bin, ...words].map((w) => `'${w}'`).join(' ')})`,
        'CURRENT=${#words}',
        '_spcctl',
      ].join('\n');
      return execFileSync(zsh, ['-f', '-c', script], { encoding: 'utf8' })
        .split('\n')
        .filter((l) => l !== '');
    };
    expect(drive(['ge'])).toContain('generations');
    expect(drive(['status', '-o', ''])).toEqual(['json', 'yaml', 'wide']);
    expect(drive(['restart', ''], stub)).toEqual(['nova_compute', 'neutron_agent', 'cron']);
    expect(drive(['validate', ''])).toEqual(['_files -/']);
  });
});
