import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { waitFor } from './wait.js';

/** The checkout: the nearest folder with a package.json (the tests run from test/, benchmarks from dist-bench/). */
function findRepo(from: string): string {
  for (let dir = from; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
  }
  throw new Error(`no package.json above ${from}`);
}

export const REPO = findRepo(resolve(new URL('.', import.meta.url).pathname));

export interface Sandbox {
  readonly root: string;
  readonly setsDir: string;
  readonly stateDir: string;
  readonly socket: string;
  readonly instance: string;
}

/** Fresh directories and a unique instance name for one test file. */
export function sandbox(prefix: string): Sandbox {
  const root = mkdtempSync(join(tmpdir(), `spcd-${prefix}-`));
  const setsDir = join(root, 'sets');
  mkdirSync(setsDir);
  const instance = `t-${prefix}-${process.pid}-${Math.floor(Math.random() * 1e6)}`;
  return { root, setsDir, stateDir: join(root, 'state'), socket: join(root, 'run', 'spcd.sock'), instance };
}

export function writeSet(sb: Sandbox, file: string, yaml: string): void {
  writeFileSync(join(sb.setsDir, file), yaml);
}

/**
 * One container of a set file's `containers:` map, as the integration tests
 * write it: the demo image running `demo-service sleep` with no network;
 * `fields` are more of its lines (YAML, indented as its fields).
 */
export function demoContainerYaml(
  name: string,
  fields: readonly string[] = [],
  image = 'spcd-demo/service:1',
): string {
  return [
    `  ${name}:`,
    `    image: ${image}`,
    '    command: [demo-service, sleep]',
    '    network: none',
    ...fields.map((f) => `    ${f}`),
    '',
  ].join('\n');
}

/** The no-privileged override this VM needs, for a list of containers. */
export function capsOverride(sb: Sandbox, names: string[]): string {
  const path = join(sb.root, 'overrides.yaml');
  writeFileSync(
    path,
    `containers:\n${names.map((n) => `  ${n}:\n    privileged: false\n    cap_add: [ALL]\n    cap_drop: [SYS_RESOURCE]\n`).join('')}`,
  );
  return path;
}

/** The line spcd logs once its first pass converged. */
const READY = '"spcd ready"';

/** A real spcd process (bin/spcd.js on the built dist/), as operators run it. */
export class SpcdProcess {
  readonly output: string[] = [];
  private exited: Promise<number | null>;
  private closed = false;

  private constructor(readonly child: ChildProcess) {
    const collect = (b: Buffer): void => {
      for (const line of b.toString('utf8').split('\n')) if (line) this.output.push(line);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    this.exited = new Promise((r) => child.on('exit', (code) => r(code)));
    child.on('close', () => (this.closed = true));
  }

  static start(sb: Sandbox, extra: string[] = [], env: NodeJS.ProcessEnv = {}): SpcdProcess {
    const child = spawn(
      join(REPO, 'bin', 'spcd.js'),
      [
        '--sets',
        sb.setsDir,
        '--state-dir',
        sb.stateDir,
        '--socket',
        sb.socket,
        '--instance',
        sb.instance,
        '--relist-interval',
        '2s',
        '--min-ready',
        '500ms',
        ...extra,
      ],
      {
        cwd: REPO,
        env: { ...process.env, SPCD_LOG_LEVEL: 'debug', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    return new SpcdProcess(child);
  }

  /**
   * Resolves when the log says spcd converged its first pass. When spcd exits
   * first it rejects at once, with the exit code (or signal) and the tail of
   * its output, instead of waiting out the deadline.
   */
  async readyOrExit(timeoutMs: number): Promise<void> {
    const ended = (): boolean => this.child.exitCode !== null || this.child.signalCode !== null;
    await waitFor('spcd ready', () => this.logged(READY) || ended(), { timeoutMs });
    if (this.logged(READY)) return;
    // 'close' comes after 'exit' once stdout and stderr are read to their end: the tail is complete.
    await waitFor('spcd output to end', () => this.closed, { timeoutMs: 10_000 }).catch(() => undefined);
    throw new Error(
      `spcd exited ${this.child.signalCode ?? this.child.exitCode} before it was ready:\n${this.output.slice(-30).join('\n')}`,
    );
  }

  /** readyOrExit with the deadline most tests want. */
  ready(timeoutMs = 30_000): Promise<void> {
    return this.readyOrExit(timeoutMs);
  }

  logged(fragment: string): boolean {
    return this.output.some((l) => l.includes(fragment));
  }

  async stop(): Promise<number | null> {
    if (this.child.exitCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }

  async kill9(): Promise<void> {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }

  wait(): Promise<number | null> {
    return this.exited;
  }

  /** The exit code, or 'still running' when spcd has not exited after ms. */
  async exitWithin(ms: number): Promise<number | null | 'still running'> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'still running'>((r) => (timer = setTimeout(() => r('still running'), ms)));
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}
