import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { createLogger } from '../../agent/log.js';
import { EventBus, type SpcdEvent } from '../../agent/model/events.js';
import { allContainers } from '../../agent/model/spec.js';
import type { RetriesEnded } from '../../agent/model/operation.js';
import type { DesiredContainer } from '../../agent/planner/types.js';
import { Definitions, type DefinitionsTarget } from '../../agent/config/definitions.js';
import { TemplateConfig } from '../../agent/config/template-config.js';
import { FakeClock } from '../support/fake-clock.js';
import { containerYaml, LIBRARY_FILE } from '../fixtures/spec/helpers.js';

const log = createLogger({ level: 'silent' });
const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

/** Definitions over real files in a temp dir, handing reloads to a recording target. */
function setup(setFile: string) {
  const root = mkdtempSync(join(tmpdir(), 'spcd-definitions-'));
  roots.push(root);
  const paths = {
    setsDir: join(root, 'sets'),
    templatesDir: join(root, 'templates'),
    healthchecksDir: join(root, 'checks'),
    stateDir: join(root, 'state'),
  };
  for (const d of Object.values(paths)) mkdirSync(d, { mode: 0o755 });
  copyFileSync(LIBRARY_FILE, join(paths.healthchecksDir, 'library.yaml'));
  writeFileSync(join(paths.setsDir, 's.yaml'), setFile);
  const applied: number[] = [];
  let retried: RetriesEnded = { quarantined: [], operations: [] };
  const events: SpcdEvent[] = [];
  const bus = new EventBus();
  bus.subscribe((e) => events.push(e));
  const clock = new FakeClock();
  const config = new TemplateConfig({
    templatesDir: paths.templatesDir,
    configRoot: join(root, 'config'),
    files: { globalsFile: undefined, secretsFile: undefined },
    log,
  });
  const target: DefinitionsTarget = {
    desired: () =>
      Promise.resolve(
        allContainers(defs.current.sets).map((spec): DesiredContainer => ({
          spec,
          specHash: 'h',
          configHash: 'none',
        })),
      ),
    preview: () => ({ steps: [], waiting: [] }),
    setDesired: (d) => applied.push(d.length),
    retryQuarantined: () => Promise.resolve(retried),
  };
  const defs: Definitions = new Definitions({ paths, config, target, events: bus, clock, log });
  const retries = (r: RetriesEnded): void => {
    retried = r;
  };
  return { defs, paths, applied, events, retries };
}

const reloads = (events: SpcdEvent[]) =>
  events.filter((e) => e.type === 'reload').map((e) => (e.type === 'reload' ? e.ok : undefined));

describe('Definitions', () => {
  it('refuses a reload before start-up has read the definitions, touching nothing', async () => {
    const { defs, applied, events } = setup(containerYaml([]));
    const err = await defs.reload().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSpcdError(err, 'DEFINITIONS_NOT_LOADED')).toBe(true);
    expect(applied).toEqual([]);
    expect(reloads(events)).toEqual([]);
  });

  it('a reload that cannot read the definitions leaves the ones in force, and says so', async () => {
    const { defs, paths, applied, events } = setup(containerYaml([]));
    await defs.open();
    expect(defs.error).toBeUndefined();
    expect(allContainers(defs.current.sets).map((c) => c.name)).toEqual(['web']);
    writeFileSync(join(paths.setsDir, 's.yaml'), 'set: s\ncontainers: [\n');
    const err = await defs.reload().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isSpcdError(err, 'SPEC_YAML')).toBe(true);
    expect(allContainers(defs.current.sets).map((c) => c.name)).toEqual(['web']);
    expect(defs.error).toBeUndefined();
    expect(applied).toEqual([]);
    expect(reloads(events)).toEqual([false]);
  });

  it('definitions unreadable at start-up are not in force until a reload reads them', async () => {
    const { defs, paths, applied, events } = setup('set: s\ncontainers: [\n');
    await defs.open();
    expect(isSpcdError(defs.error, 'SPEC_YAML')).toBe(true);
    expect(defs.current.sets).toEqual([]);
    writeFileSync(join(paths.setsDir, 's.yaml'), containerYaml([]));
    expect(await defs.reload()).toMatchObject({ containers: 1, changes: [] });
    expect(defs.error).toBeUndefined();
    expect(applied).toEqual([1]);
    expect(reloads(events)).toEqual([true]);
  });

  it("a reload's result names the quarantine retries it caused, by operation id, with their outcomes", async () => {
    const { defs, retries } = setup(containerYaml([]));
    await defs.open();
    expect(await defs.reload()).toMatchObject({ operations: [] });
    const cleared = {
      operationId: 'recover-1',
      kind: 'recover',
      container: 'a',
      outcome: 'cleared',
    } as const;
    const stays = { ...cleared, operationId: 'recover-2', container: 'b', outcome: 'quarantined' } as const;
    retries({ quarantined: ['b'], operations: [cleared, stays] });
    expect(await defs.reload()).toEqual({
      containers: 1,
      changes: [],
      quarantined: ['b'],
      operations: [cleared, stays],
    });
  });
});
