import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { upgradeContainer } from '../../agent/executor/upgrade.js';
import { createLogger } from '../../agent/log.js';
import { specHash } from '../../agent/model/hash.js';
import type { BindMount, ContainerSpec } from '../../agent/model/spec.js';
import { FakeProcess, INSTANCE } from '../support/fake-executor.js';
import { containerSpec } from '../support/spec.js';
import { engineView, upgradeTo } from '../support/upgrade-fixture.js';
import { waitFor } from '../support/wait.js';

/**
 * Named volumes over the fake engine: spcd makes a missing one, labelled as
 * its own, before the container (or its bootstrap task) that binds it is
 * created; the fake engine, like Docker, would otherwise make it unlabelled.
 * An existing volume is used as it is; no removal takes a volume.
 */
let proc: FakeProcess | undefined;
afterEach(async () => {
  await proc?.close();
  proc = undefined;
});

const logs = (target: string): BindMount => ({
  kind: 'volume',
  source: 'kolla_logs',
  target,
  readOnly: false,
});
const WITH_LOGS = containerSpec('svc', { binds: [logs('/var/log/kolla')] });
const SPCD_LABELS = {
  'spcd.volume.created-by': 'spcd',
  'spcd.instance': INSTANCE,
  'spcd.volume.container': 'svc',
};

/** The engine calls about volumes and creates, in order. */
const calls = (p: FakeProcess): string[] =>
  p.engine.calls
    .filter((c) => ['volumeInfo', 'createVolume', 'create'].includes(c.kind))
    .map((c) => `${c.kind} ${c.arg}`);

async function start(): Promise<FakeProcess> {
  proc = await FakeProcess.create();
  return proc;
}

describe('named volumes before a create', () => {
  it('creates a missing volume with spcd labels before the container', async () => {
    const p = await start();
    await p.first(WITH_LOGS);
    expect(p.engine.volumes.get('kolla_logs')).toEqual({
      name: 'kolla_logs',
      driver: 'local',
      labels: SPCD_LABELS,
    });
    expect(calls(p)).toEqual(['volumeInfo kolla_logs', 'createVolume kolla_logs', 'create svc']);
  });

  it('uses a volume that exists as it is: not created again, not relabelled', async () => {
    const p = await start();
    const kolla = { name: 'kolla_logs', driver: 'local', labels: { made: 'kolla-ansible' } };
    p.engine.volumes.set('kolla_logs', kolla);
    await p.first(WITH_LOGS);
    expect(p.engine.volumes.get('kolla_logs')).toEqual({ ...kolla, labels: { made: 'kolla-ansible' } });
    expect(p.engine.count('createVolume')).toBe(0);
  });

  it('an upgrade makes the new generation volume before its bootstrap task and its create', async () => {
    const p = await start();
    const old = await p.first(containerSpec('svc', { image: 'img:1' }));
    p.engine.addImage('img:2');
    const next: ContainerSpec = {
      ...WITH_LOGS,
      image: 'img:2',
      bootstrap: [{ name: 'sync', command: ['true'], timeoutMs: 1000, acceptExitCodes: [0] }],
    };
    await upgradeContainer(p.deps, { ...upgradeTo(old), spec: next, specHash: specHash(next) });
    expect(engineView(p)).toEqual(['svc:running:g2']);
    expect(p.engine.volumes.get('kolla_logs')?.labels).toEqual(SPCD_LABELS);
    expect(calls(p).slice(1)).toEqual([
      'volumeInfo kolla_logs',
      'createVolume kolla_logs',
      'create svc.g2.task-sync',
      'create svc.g2.new',
    ]);
  });

  it('a volume the engine cannot create: VOLUME_CREATE_FAILED, no container, no generation', async () => {
    const p = await start();
    p.engine.fault({ kind: 'createVolume', nth: 1, fail: new SpcdError('ENGINE_FAILED', 'driver says no') });
    const err = await p.first(WITH_LOGS).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SpcdError);
    expect((err as SpcdError).code).toBe('VOLUME_CREATE_FAILED');
    expect((err as SpcdError).details).toMatchObject({ container: 'svc', volume: 'kolla_logs' });
    expect((err as SpcdError).message).toContain('driver says no');
    expect(p.engine.count('create')).toBe(0);
    expect(p.deps.state.record('svc')).toBeUndefined();
  });

  it('an engine that does not answer stays ENGINE_TIMEOUT (the engine watch handles it)', async () => {
    const p = await start();
    p.engine.fault({ kind: 'volumeInfo', nth: 1, fail: new SpcdError('ENGINE_TIMEOUT', 'late') });
    const err = await p.first(WITH_LOGS).catch((e: unknown) => e);
    expect((err as SpcdError).code).toBe('ENGINE_TIMEOUT');
    expect(p.engine.count('create')).toBe(0);
  });

  it('two containers that share a volume, created side by side: one creates it, the other uses it', async () => {
    const p = await start();
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _enc, cb): void {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        cb();
      },
    });
    p.deps = { ...p.deps, log: createLogger({ destination, env: { SPCD_LOG_FORMAT: 'json' } }) };
    // Both look the volume up before either creates it.
    p.engine.fault({ kind: 'volumeInfo', hang: true });
    const both = Promise.all([
      p.first(WITH_LOGS),
      p.first(containerSpec('other', { binds: WITH_LOGS.binds })),
    ]);
    await waitFor('both lookups', () => p.engine.hanging().length === 2, { timeoutMs: 5_000, intervalMs: 1 });
    p.engine.clearFaults();
    p.engine.answerHung('volumeInfo');
    await both;
    const said = lines
      .map((l) => JSON.parse(l) as { msg: string; container: string })
      .filter((l) => l.msg.startsWith('volume'));
    expect(said.map((l) => `${l.container}: ${l.msg}`).sort()).toEqual([
      'other: volume made meanwhile: used as it is',
      'svc: volume created',
    ]);
    expect(p.engine.volumes.get('kolla_logs')?.labels).toEqual(SPCD_LABELS);
  });
});
