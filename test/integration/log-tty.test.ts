/**
 * The real spcd binary's log: readable lines on a terminal (a pty made by
 * util-linux `script`), JSON lines in a pipe, the same fields in both. A
 * state directory that cannot be made fails the start, so spcd logs and
 * exits by itself: no daemon is left behind.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { REPO, sandbox } from '../support/daemon.js';

const run = promisify(execFile);
const sb = sandbox('logtty');
const blocker = join(sb.root, 'a-file');
writeFileSync(blocker, '');
const argv = [
  join(REPO, 'bin', 'spcd.js'),
  '--sets',
  sb.setsDir,
  '--state-dir',
  join(blocker, 'state'), // under a file: the state-lock component fails
  '--socket',
  sb.socket,
  '--instance',
  sb.instance,
];
const env = { ...process.env, SPCD_LOG_FORMAT: '', NO_COLOR: '1' };

async function exitOutput(cmd: string, args: string[]): Promise<string> {
  try {
    await run(cmd, args, { env, timeout: 60_000 });
    throw new Error('spcd started with an unusable state directory');
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    expect(e.code).toBe(1);
    return `${e.stdout ?? ''}${e.stderr ?? ''}`;
  }
}

describe('the log of the real binary', () => {
  it('is JSON in a pipe and readable lines on a terminal, with the same fields', async () => {
    const piped = await exitOutput(argv[0]!, argv.slice(1));
    const record = piped
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((r) => r.msg === 'cannot start; everything opened is closed');
    expect(record).toMatchObject({ level: 50, svc: 'spcd', component: 'state-lock' });

    // script -e returns the child's exit code; -q no banner; the command's output is the pty's
    const shell = argv.map((a) => `'${a}'`).join(' ');
    const tty = await exitOutput('script', ['-qfec', shell, '/dev/null']);
    const lines = tty.split(/\r?\n/);
    const at = lines.findIndex((l) => l.includes('cannot start; everything opened is closed'));
    const line = lines[at];
    expect(line, tty).toMatch(
      /^\[\d\d:\d\d:\d\d\.\d{3}\] ERROR: cannot start; everything opened is closed \{/,
    );
    expect(tty).not.toMatch(/^\{"level"/m);
    // the record: its line, then an error's indented lines (`    err: ...`)
    const below: string[] = [];
    for (const l of lines.slice(at + 1)) {
      if (!/^\s/.test(l)) break;
      below.push(l);
    }
    const block = [line, ...below].join('\n');
    for (const [k, v] of Object.entries(record!)) {
      if (k === 'time' || k === 'level' || k === 'msg') continue;
      const inline = `"${k}":${JSON.stringify(v)}`;
      const indented = `    ${k}: ${JSON.stringify(v)}`;
      expect(block.includes(inline) || block.includes(indented), `${k} in:\n${block}`).toBe(true);
    }
    expect(block).toContain(`    err: ${JSON.stringify(record!.err)}`);
  });
});
