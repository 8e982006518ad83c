import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, type Answer } from '../api-http.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../daemon.js';
import { waitFor } from '../wait.js';

/** The demo images a chaos run upgrades between (scripts/build-demo-images.sh). */
export const GOOD_IMAGES = ['spcd-demo/service:1', 'spcd-demo/service:2', 'spcd-demo/service:3'] as const;
export const BAD_IMAGES = [
  'spcd-demo/service:crash',
  'spcd-demo/service:unhealthy',
  'spcd-demo/service:hang',
] as const;

export interface ChaosContainer {
  readonly name: string;
  /** The image the definition on disk names. */
  image: string;
  /** Bumped by a definition change: lands in the environment, so the spec hash moves. */
  revision: number;
}

const SPCD_FLAGS = ['--gate-deadline', '5s', '--min-ready', '300ms', '--relist-interval', '2s'];

/**
 * One spcd under chaos: its sandbox, its definitions on disk, and the
 * process, which the run SIGKILLs and starts again at will.
 */
export class ChaosWorld {
  readonly sb: Sandbox;
  readonly containers: ChaosContainer[];
  spcd: SpcdProcess | undefined;
  starts = 0;

  constructor() {
    this.sb = sandbox('chaos');
    const n = (s: string): string => `${this.sb.instance}-${s}`;
    this.containers = [
      { name: n('a'), image: GOOD_IMAGES[0], revision: 0 },
      { name: n('b'), image: GOOD_IMAGES[0], revision: 0 },
      { name: n('c'), image: GOOD_IMAGES[0], revision: 0 },
    ];
  }

  /** a: checked service; b: has a bootstrap task (runs before each upgrade); c: depends on a. */
  writeDefinitions(): void {
    const [a, b, c] = this.containers as [ChaosContainer, ChaosContainer, ChaosContainer];
    const common = (x: ChaosContainer): string => `
    image: ${x.image}
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
    environment: { CHAOS_REV: "${x.revision}" }
    healthchecks:
      - { name: ok, exec: [demo-check], interval: 1s, timeout: 900ms, failure_threshold: 2 }`;
    writeSet(
      this.sb,
      'chaos.yaml',
      `set: chaos
containers:
  ${a.name}:${common(a)}
  ${b.name}:${common(b)}
    bootstrap:
      - { name: prep, command: [sh, -c, "sleep 0.3; echo prepared"], timeout: 20s }
  ${c.name}:${common(c)}
    depends_on: [${a.name}]
`,
    );
  }

  start(): SpcdProcess {
    this.starts++;
    this.spcd = SpcdProcess.start(this.sb, SPCD_FLAGS);
    return this.spcd;
  }

  async kill9(): Promise<void> {
    await this.spcd?.kill9();
  }

  async stop(): Promise<void> {
    await this.spcd?.stop();
  }

  alive(): boolean {
    return (
      this.spcd !== undefined && this.spcd.child.exitCode === null && this.spcd.child.signalCode === null
    );
  }

  api(method: string, path: string, body?: object): Promise<Answer> {
    return call(this.sb.socket, method, path, body);
  }

  /** Waits until the API answers (after a start). */
  async answering(timeoutMs = 60_000): Promise<void> {
    await waitFor(
      'spcd answering',
      async () => {
        if (!this.alive()) throw new Error(`spcd exited:\n${this.tail()}`);
        return (await this.api('GET', '/v1/status')).status === 200;
      },
      { timeoutMs, intervalMs: 100 },
    );
  }

  journalEntries(): string[] {
    const dir = join(this.sb.stateDir, 'journal');
    if (!existsSync(dir)) return [];
    return readdirSync(dir).filter((f) => f.endsWith('.json') && !f.startsWith('.'));
  }

  /** The last known good generation of each container, from state.json. */
  lastKnownGood(): Map<string, number | null> {
    const out = new Map<string, number | null>();
    const path = join(this.sb.stateDir, 'state.json');
    if (!existsSync(path)) return out;
    const data = JSON.parse(readFileSync(path, 'utf8')) as {
      containers: Record<string, { lastKnownGood: number | null }>;
    };
    for (const [name, rec] of Object.entries(data.containers)) out.set(name, rec.lastKnownGood);
    return out;
  }

  tail(n = 40): string {
    return (this.spcd?.output ?? []).slice(-n).join('\n');
  }
}
