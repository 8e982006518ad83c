import { execFileSync } from 'node:child_process';
import { between, pick, weighted, type Rand } from './rng.js';
import { BAD_IMAGES, GOOD_IMAGES, type ChaosWorld } from './world.js';
import { docker } from '../docker.js';
import type { DiskFiller } from './disk.js';

export type ChaosAction =
  | 'upgrade-good'
  | 'upgrade-bad'
  | 'upgrade-set'
  | 'rollback'
  | 'restart'
  | 'stop'
  | 'kill-container'
  | 'edit-definition'
  | 'reload'
  | 'disk-full'
  | 'dockerd-kill';

export interface ActionContext {
  readonly world: ChaosWorld;
  readonly rand: Rand;
  readonly disk: DiskFiller | undefined;
  readonly dockerd: boolean;
  readonly log: (line: string) => void;
  /** Counts API answers by status, for the summary. */
  readonly answers: Map<number, number>;
}

export function chooseAction(ctx: ActionContext): ChaosAction {
  const table: [ChaosAction, number][] = [
    ['upgrade-good', 5],
    ['upgrade-bad', 4],
    ['upgrade-set', 1],
    ['rollback', 2],
    ['restart', 2],
    ['stop', 1],
    ['kill-container', 2],
    ['edit-definition', 3],
    ['reload', 1],
  ];
  if (ctx.disk) table.push(['disk-full', 1]);
  if (ctx.dockerd) table.push(['dockerd-kill', 3]);
  return weighted(ctx.rand, table);
}

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function api(ctx: ActionContext, method: string, path: string, body?: object): Promise<void> {
  try {
    const a = await ctx.world.api(method, path, body);
    ctx.answers.set(a.status, (ctx.answers.get(a.status) ?? 0) + 1);
    if (a.status >= 400 && a.status !== 409)
      ctx.log(`  ${method} ${path} -> ${a.status} ${a.text.slice(0, 160)}`);
  } catch (err) {
    // spcd may be down at that moment (we kill it); the action simply did not happen.
    ctx.answers.set(0, (ctx.answers.get(0) ?? 0) + 1);
    ctx.log(`  ${method} ${path} -> no answer (${(err as Error).message})`);
  }
}

/** Carries out one action. It returns once the action was asked for, not when it is done. */
export async function perform(ctx: ActionContext, action: ChaosAction): Promise<string> {
  const { world, rand } = ctx;
  const target = pick(rand, world.containers);
  const path = `/v1/containers/${encodeURIComponent(target.name)}`;
  switch (action) {
    case 'upgrade-good': {
      const image = pick(rand, GOOD_IMAGES);
      await api(ctx, 'POST', `${path}/upgrade`, { image });
      return `${action} ${target.name} -> ${image}`;
    }
    case 'upgrade-bad': {
      const image = pick(rand, BAD_IMAGES);
      await api(ctx, 'POST', `${path}/upgrade`, { image });
      return `${action} ${target.name} -> ${image}`;
    }
    case 'upgrade-set': {
      const image = pick(rand, [...GOOD_IMAGES, ...BAD_IMAGES]);
      const images = Object.fromEntries(world.containers.map((c) => [c.name, image]));
      await api(ctx, 'POST', `/v1/sets/chaos/upgrade`, { images });
      return `${action} -> ${image}`;
    }
    case 'rollback':
      await api(ctx, 'POST', `${path}/rollback`, {});
      return `${action} ${target.name}`;
    case 'restart':
      await api(ctx, 'POST', `${path}/restart`, {});
      return `${action} ${target.name}`;
    case 'stop':
      await api(ctx, 'POST', `${path}/stop`, {});
      return `${action} ${target.name}`;
    case 'kill-container':
      await docker()
        .getContainer(target.name)
        .kill()
        .catch(() => undefined);
      return `${action} ${target.name}`;
    case 'edit-definition': {
      target.revision++;
      if (rand() < 0.5) target.image = pick(rand, GOOD_IMAGES);
      world.writeDefinitions();
      if (rand() < 0.5) world.spcd?.child.kill('SIGHUP');
      else await api(ctx, 'POST', '/v1/reload', {});
      return `${action} ${target.name} rev ${target.revision} image ${target.image}`;
    }
    case 'reload':
      await api(ctx, 'POST', '/v1/reload', {});
      return action;
    case 'disk-full': {
      const disk = ctx.disk!;
      disk.fill();
      await perform(ctx, pick(rand, ['upgrade-good', 'stop', 'restart', 'edit-definition'] as const));
      await delay(between(rand, 500, 2500));
      disk.free();
      return `${action} (state directory full for a while)`;
    }
    case 'dockerd-kill': {
      await perform(ctx, 'upgrade-good');
      await delay(between(rand, 0, 1500));
      restartDockerd(ctx.log);
      return `${action} during an upgrade`;
    }
  }
}

/** SIGKILLs the engine and starts it again with the project's script (only when the run owns the engine). */
function restartDockerd(log: (line: string) => void): void {
  const pid = execFileSync('pgrep', ['-xo', 'dockerd']).toString().trim();
  log(`  SIGKILL dockerd ${pid}`);
  process.kill(Number(pid), 'SIGKILL');
  execFileSync('bash', ['scripts/ensure-docker.sh'], { stdio: 'ignore', timeout: 120_000 });
}
