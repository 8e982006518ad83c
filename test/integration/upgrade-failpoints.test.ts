import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAILPOINTS } from '../../agent/executor/failpoint.js';
import { specHash } from '../../agent/model/hash.js';
import { allContainers } from '../../agent/model/spec.js';
import { loadDesired } from '../../agent/spec/load.js';
import { REPO, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, containersOf, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * Crash safety with the real daemon process: for every failpoint, spcd is
 * run with SPCD_FAILPOINT=<point>, a definition change + SIGHUP starts the
 * upgrade (the reconciler's 'recreate', the same transaction), spcd SIGKILLs
 * itself at the point, and a restart without the failpoint converges within
 * 30 s to exactly one running instance, with an empty journal. A sampler
 * checks that two instances never run at once, from the change to convergence.
 *
 * Generations are never reused: when the crash came after the allocation, the
 * interrupted number is burnt and the retry on restart takes the next one. So
 * "N or N+1" is checked as: the instance runs either the old generation N with
 * the old spec, or a newer generation with the new spec.
 *
 * Killed once the new generation was started (starting-new, gating), recovery
 * rolls it forward: the very instance left running passes its gate again and
 * is committed, never stopped or started again. Before that, it undoes.
 */
const sb: Sandbox = sandbox('failpoints');
const name = `${sb.instance}-svc`;

function setYaml(step: string): string {
  return `
set: fp
containers:
  ${name}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
    environment: { STEP: "${step}" }
`;
}

async function definitionHash(): Promise<string> {
  const d = await loadDesired({
    setsDir: sb.setsDir,
    checkLibraryFile: join(REPO, 'healthchecks/library.yaml'),
  });
  return specHash(allContainers(d.sets)[0]!);
}

interface StateFile {
  containers: Record<
    string,
    { lastKnownGood: number | null; generations: { generation: number; outcome: string }[] }
  >;
}

const readState = (): StateFile =>
  JSON.parse(readFileSync(join(sb.stateDir, 'state.json'), 'utf8')) as StateFile;
const journalFiles = (): string[] =>
  readdirSync(join(sb.stateDir, 'journal')).filter((f) => !f.startsWith('.'));

/** Samples the engine until stopped; records the most instances seen running at once. */
function sampler(): { stop(): Promise<number> } {
  let max = 0;
  let on = true;
  const loop = (async () => {
    while (on) {
      const running = (await containersOf(sb.instance)).filter((c) => c.State === 'running').length;
      max = Math.max(max, running);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      return max;
    },
  };
}

/** The journal step left by a kill at each point (none: nothing had been journaled, or it was cleared by the commit). */
const JOURNALED: Record<(typeof FAILPOINTS)[number], string | null> = {
  'upgrade.after-pull': null,
  'upgrade.after-allocate': null,
  'upgrade.after-create': 'creating',
  'upgrade.after-rename': 'renaming',
  'upgrade.after-stop-old': 'stopping-old',
  'upgrade.after-start-new': 'starting-new',
  'upgrade.after-gate': 'gating',
  'upgrade.after-commit': null,
};

/** The road the restarted spcd's recovery takes for the entry (null: nothing to recover). */
const ROAD: Record<(typeof FAILPOINTS)[number], 'undone' | 'rolledForward' | null> = {
  'upgrade.after-pull': null,
  'upgrade.after-allocate': null,
  'upgrade.after-create': 'undone',
  'upgrade.after-rename': 'undone',
  'upgrade.after-stop-old': 'undone',
  'upgrade.after-start-new': 'rolledForward',
  'upgrade.after-gate': 'rolledForward',
  'upgrade.after-commit': null,
};

interface LeftEntry {
  step: string;
  toGeneration: number;
  newId: string | null;
}

/** The new instance as the kill left it: its id and when it was started. */
async function startedOf(
  entry: LeftEntry | undefined,
): Promise<{ id: string; startedAt: string } | undefined> {
  const c = entry?.newId ? await inspect(entry.newId) : undefined;
  return c?.State.Running ? { id: c.Id, startedAt: c.State.StartedAt } : undefined;
}

/** From the first recovery log line to 'journal recovery done': what recovery added to the start. */
function recoveryMs(output: readonly string[]): number | undefined {
  const timeOf = (msg: RegExp): number | undefined => {
    const l = output.find((x) => msg.test(x));
    return l ? (JSON.parse(l) as { time: number }).time : undefined;
  };
  const from = timeOf(/"msg":"(undoing|rolling|finishing) an interrupted upgrade/);
  const to = timeOf(/"msg":"journal recovery done"/);
  return from !== undefined && to !== undefined ? to - from : undefined;
}

let spcd: SpcdProcess | undefined;

beforeAll(async () => {
  writeSet(sb, 'fp.yaml', setYaml('initial'));
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
  await waitFor('first generation running', async () => {
    const list = await containersOf(sb.instance);
    return list.length === 1 && list[0]!.State === 'running';
  });
  expect(await spcd.stop()).toBe(0);
  spcd = undefined;
});

afterAll(async () => {
  await spcd?.kill9();
  await cleanupInstance(sb.instance);
});

describe('SIGKILL at every failpoint, then a restart, converges', () => {
  for (const point of FAILPOINTS) {
    it(point, async () => {
      const before = (await containersOf(sb.instance))[0]!;
      const oldGen = Number(before.Labels['spcd.generation']);
      const oldHash = before.Labels['spcd.spec-hash'];
      const watch = sampler();
      try {
        // 1. spcd with the failpoint: adopt, then a definition change + SIGHUP starts the upgrade.
        spcd = SpcdProcess.start(sb, [], { SPCD_FAILPOINT: point });
        await spcd.ready();
        writeSet(sb, 'fp.yaml', setYaml(point));
        const newHash = await definitionHash();
        expect(newHash).not.toBe(oldHash);
        spcd.child.kill('SIGHUP');
        await spcd.wait();
        expect(spcd.child.signalCode, spcd.output.slice(-5).join('\n')).toBe('SIGKILL');
        spcd = undefined;
        const entries = journalFiles().map(
          (f) => JSON.parse(readFileSync(join(sb.stateDir, 'journal', f), 'utf8')) as LeftEntry,
        );
        expect(entries.map((e) => e.step)).toEqual(JOURNALED[point] ? [JOURNALED[point]] : []);
        const started = await startedOf(entries[0]);
        if (ROAD[point] === 'rolledForward') expect(started).toBeDefined();

        // 2. restart without it: recovery, then convergence.
        const t0 = Date.now();
        spcd = SpcdProcess.start(sb);
        await spcd.ready();
        const converged = await waitFor(
          'one running instance of the new definition and a clean journal',
          async () => {
            const list = await containersOf(sb.instance);
            if (list.length !== 1 || list[0]!.State !== 'running') return false;
            if (list[0]!.Names[0] !== `/${name}`) return false;
            if (list[0]!.Labels['spcd.spec-hash'] !== newHash) return false;
            if (journalFiles().length !== 0) return false;
            const gen = Number(list[0]!.Labels['spcd.generation']);
            if (readState().containers[name]?.lastKnownGood !== gen) return false;
            return { gen, ms: Date.now() - t0 };
          },
          { timeoutMs: 30_000 },
        );
        expect(converged.gen).toBeGreaterThan(oldGen);
        // No generation is left 'in-progress' by the crash, and numbers only went up.
        const gens = readState().containers[name]!.generations;
        expect(gens.filter((g) => g.outcome === 'in-progress')).toEqual([]);
        expect(gens.filter((g) => g.outcome === 'current').map((g) => g.generation)).toEqual([converged.gen]);
        const line = spcd.output.find((l) => l.includes('journal recovery done'));
        const recovery = line
          ? (JSON.parse(line) as { undone: string[]; rolledForward: string[]; finished: string[] })
          : undefined;
        const road = ROAD[point];
        if (road) {
          expect(recovery).toMatchObject({ [road]: [name], finished: [], quarantined: [] });
          // The interrupted generation ends committed (rolled forward) or rolled back, nothing in between.
          const interrupted = gens.find((g) => g.generation === entries[0]!.toGeneration);
          expect(interrupted?.outcome).toBe(road === 'rolledForward' ? 'current' : 'rolled-back');
          // Either way a newer generation is committed: the old one is superseded, not current.
          expect(gens.find((g) => g.generation === oldGen)?.outcome).toBe('superseded');
        } else expect(recovery).toBeUndefined();
        if (road === 'rolledForward') {
          // The instance the kill left running is the one committed: not stopped, not started again.
          const now = await inspect(started!.id);
          expect(converged.gen).toBe(entries[0]!.toGeneration);
          expect({ id: now?.Id, startedAt: now?.State.StartedAt, running: now?.State.Running }).toEqual({
            ...started,
            running: true,
          });
        }
        console.log(
          `${point}: converged at generation ${converged.gen} (was ${oldGen}) in ${converged.ms} ms; ${recovery ? JSON.stringify({ undone: recovery.undone, rolledForward: recovery.rolledForward, finished: recovery.finished, recoveryMs: recoveryMs(spcd.output) }) : 'nothing to recover'}`,
        );
        expect(await spcd.stop()).toBe(0);
        spcd = undefined;
      } finally {
        const most = await watch.stop();
        expect(most).toBeLessThanOrEqual(1);
      }
    });
  }
});
