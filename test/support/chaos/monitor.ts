import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { containersOf } from '../docker.js';

const LIVE = new Set(['running', 'restarting', 'paused']);

/**
 * Watches the engine and the state directory all the time a chaos run goes
 * on, and records every breach of the invariants that must hold at every
 * instant, not only after convergence:
 *  - never two live instances of one container;
 *  - a generation is never reused: one (container, generation) pair names
 *    one engine container, ever;
 *  - state.json always parses (atomic writes: never torn).
 */
export class InvariantMonitor {
  readonly violations: string[] = [];
  private readonly generationIds = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private samples = 0;

  constructor(
    private readonly instance: string,
    private readonly stateDir: string,
    private readonly intervalMs = 150,
  ) {}

  get sampleCount(): number {
    return this.samples;
  }

  start(): void {
    const loop = (): void => {
      this.running = this.sample()
        .catch(() => undefined) // the engine may be down on purpose; the next sample tries again
        .finally(() => {
          if (this.timer !== undefined) this.timer = setTimeout(loop, this.intervalMs);
        });
    };
    this.timer = setTimeout(loop, 0);
  }

  async stop(): Promise<void> {
    const t = this.timer;
    this.timer = undefined;
    if (t) clearTimeout(t);
    await this.running;
  }

  private violation(text: string): void {
    if (!this.violations.includes(text)) this.violations.push(text);
  }

  async sample(): Promise<void> {
    this.checkStateFile();
    const list = await containersOf(this.instance);
    const live = new Map<string, string[]>();
    for (const c of list) {
      const labels = c.Labels ?? {};
      if (labels['spcd.task'] !== undefined) continue;
      const name = labels['spcd.container'];
      const gen = labels['spcd.generation'];
      if (name === undefined || gen === undefined) continue;
      const key = `${name}#${gen}`;
      const seen = this.generationIds.get(key);
      if (seen === undefined) this.generationIds.set(key, c.Id);
      else if (seen !== c.Id) {
        this.violation(`generation ${gen} of ${name} reused: ${seen.slice(0, 12)} then ${c.Id.slice(0, 12)}`);
      }
      if (LIVE.has(c.State))
        live.set(name, [...(live.get(name) ?? []), `${c.Names[0]}(${c.Id.slice(0, 12)})`]);
    }
    for (const [name, ids] of live) {
      if (ids.length > 1) this.violation(`${ids.length} live instances of ${name}: ${ids.join(', ')}`);
    }
    this.samples++;
  }

  private checkStateFile(): void {
    let text: string;
    try {
      text = readFileSync(join(this.stateDir, 'state.json'), 'utf8');
    } catch {
      return; // not written yet
    }
    try {
      JSON.parse(text);
    } catch (err) {
      this.violation(`state.json does not parse: ${(err as Error).message}`);
    }
  }
}
