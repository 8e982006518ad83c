import { describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import type { ExecRequest, ExecResult } from '../../agent/engine/types.js';
import { censusAfter, censusBefore, type CensusDeps } from '../../agent/executor/census.js';
import { CensusLedger } from '../../agent/status/census-ledger.js';
import { silentLogger } from '../../agent/log.js';
import { compareCensus, describeMismatch, parseCensusListing } from '../../agent/model/census.js';
import { EventBus, type SpcdEvent } from '../../agent/model/events.js';
import type { CensusSpec } from '../../agent/model/spec.js';
import { FakeClock } from '../support/fake-clock.js';

const U1 = '6f1c2a8e-0000-4000-8000-000000000001';
const U2 = '6f1c2a8e-0000-4000-8000-000000000002';
const U3 = '6f1c2a8e-0000-4000-8000-000000000003';

describe('census comparison (pure)', () => {
  it('parses one domain per line: trimmed, blank lines dropped, de-duplicated, sorted', () => {
    expect(parseCensusListing(`${U2}\n  ${U1} \n\n${U2}\n`)).toEqual([U1, U2]);
    expect(parseCensusListing('\n')).toEqual([]);
  });

  it('matches the same domains in any order, and names the missing and the new ones otherwise', () => {
    expect(compareCensus([U1, U2], [U2, U1])).toEqual({ ok: true, missing: [], added: [] });
    expect(compareCensus([], [])).toEqual({ ok: true, missing: [], added: [] });
    expect(compareCensus([U1, U2], [U2, U3])).toEqual({ ok: false, missing: [U1], added: [U3] });
    expect(compareCensus([U1], [])).toEqual({ ok: false, missing: [U1], added: [] });
    // a domain that appeared is a difference too (started meanwhile, or an autostart)
    expect(compareCensus([U1], [U1, U2])).toEqual({ ok: false, missing: [], added: [U2] });
  });

  it('describes a mismatch with the counts and at most five names per side', () => {
    const before = Array.from({ length: 7 }, (_, i) => `vm${i}`);
    const c = compareCensus(before, []);
    const text = describeMismatch('nova_libvirt', 'upgrade', before, [], c);
    expect(text).toBe(
      'domain census of nova_libvirt differs after upgrade: 7 domain(s) listed before the stop, 0 after; 7 missing (vm0, vm1, vm2, vm3, vm4 and 2 more)',
    );
  });
});

/** The engine's exec boundary: answers from a script, one per call, and logs the calls. */
class FakeExec {
  readonly calls: { id: string; argv: readonly string[]; timeoutMs: number }[] = [];
  constructor(private readonly answers: ((req: ExecRequest) => Promise<ExecResult>)[]) {}
  exec(id: string, req: ExecRequest): Promise<ExecResult> {
    this.calls.push({ id, argv: req.argv, timeoutMs: req.timeoutMs });
    const next = this.answers.shift();
    if (!next) return Promise.reject(new Error('unexpected exec'));
    return next(req);
  }
}

const listing = (domains: string[]) => (): Promise<ExecResult> =>
  Promise.resolve({
    exitCode: 0,
    timedOut: false,
    output: domains.map((d) => `${d}\n`).join(''),
    durationMs: 5,
  });
const refused = (): Promise<ExecResult> =>
  Promise.resolve({
    exitCode: 1,
    timedOut: false,
    output: 'error: failed to connect to the hypervisor\n',
    durationMs: 5,
  });

const CENSUS: CensusSpec = { argv: ['virsh', 'list', '--uuid'], timeoutMs: 2000 };

function setup(answers: ((req: ExecRequest) => Promise<ExecResult>)[], vms = 2) {
  const clock = new FakeClock();
  const events = new EventBus();
  const seen: SpcdEvent[] = [];
  events.subscribe((e) => seen.push(e));
  const engine = new FakeExec(answers);
  const deps: CensusDeps = {
    engine,
    clock,
    events,
    log: silentLogger(),
    vms: {
      runningVms: () =>
        Promise.resolve(Array.from({ length: vms }, (_, i) => ({ pid: 100 + i, name: `q${i}` }))),
    },
  };
  return { clock, events, seen, engine, deps };
}

/** Runs p to the end, moving the fake clock on while it waits on a timer. */
async function drive<T>(clock: FakeClock, p: Promise<T>): Promise<T> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 1000 && !done; i++) {
    await new Promise((r) => setImmediate(r));
    if (!done) clock.advance(50);
  }
  return p;
}

const ctx = { operationId: 'op-1', container: 'nova_libvirt', action: 'upgrade', containerId: 'new' };

describe('the census around a hypervisor change (executor, fake engine)', () => {
  it('lists in the old container before and the new one after; the same domains report ok', async () => {
    const t = setup([listing([U1, U2]), listing([U2, U1])]);
    const before = await censusBefore(t.deps, CENSUS, 'old');
    expect(before).toEqual({ census: CENSUS, domains: [U1, U2] });
    await drive(t.clock, censusAfter(t.deps, before, CENSUS, ctx));
    expect(t.engine.calls.map((c) => [c.id, c.argv.join(' ')])).toEqual([
      ['old', 'virsh list --uuid'],
      ['new', 'virsh list --uuid'],
    ]);
    expect(t.seen).toEqual([
      expect.objectContaining({
        type: 'census',
        outcome: 'ok',
        container: 'nova_libvirt',
        action: 'upgrade',
        operationId: 'op-1',
        before: [U1, U2],
        after: [U1, U2],
        missing: [],
        added: [],
        vmProcesses: 2,
      }),
    ]);
  });

  it('a domain the new hypervisor does not list is a mismatch, with the missing and the new named', async () => {
    const t = setup([listing([U1, U2]), listing([U2, U3])]);
    const before = await censusBefore(t.deps, CENSUS, 'old');
    await drive(t.clock, censusAfter(t.deps, before, CENSUS, ctx));
    const e = t.seen[0] as Extract<SpcdEvent, { type: 'census' }>;
    expect(e).toMatchObject({ outcome: 'mismatch', missing: [U1], added: [U3] });
    expect(e.detail).toContain('1 missing');
    expect(e.detail).toContain('1 new');
  });

  it('retries the listing after the start until the new hypervisor answers, within the deadline', async () => {
    const t = setup([listing([U1]), refused, refused, listing([U1])]);
    const before = await censusBefore(t.deps, CENSUS, 'old');
    await drive(t.clock, censusAfter(t.deps, before, CENSUS, ctx));
    expect(t.engine.calls).toHaveLength(4);
    // each try gets what is left of the deadline, never more
    expect(t.engine.calls[1]!.timeoutMs).toBe(2000);
    expect(t.engine.calls[3]!.timeoutMs).toBeLessThan(2000);
    expect(t.seen[0]).toMatchObject({ outcome: 'ok', after: [U1] });
  });

  it('a hypervisor that never lists again within the deadline is a mismatch with every domain missing', async () => {
    const t = setup([listing([U1]), ...Array.from({ length: 50 }, () => refused)]);
    const before = await censusBefore(t.deps, CENSUS, 'old');
    await drive(t.clock, censusAfter(t.deps, before, CENSUS, ctx));
    const tries = t.engine.calls.length - 1;
    expect(tries).toBeGreaterThan(2);
    expect(tries).toBeLessThanOrEqual(2000 / 250 + 1);
    expect(t.seen[0]).toMatchObject({ outcome: 'mismatch', before: [U1], missing: [U1], added: [] });
    expect((t.seen[0] as { detail: string }).detail).toMatch(/none could be listed after .*exited with 1/);
  });

  it('a listing that failed before the stop gives no census (skipped), and an engine error never throws', async () => {
    const t = setup([() => Promise.reject(new SpcdError('ENGINE_TIMEOUT', 'exec timed out'))]);
    const before = await censusBefore(t.deps, CENSUS, 'old');
    expect(before?.error).toMatch(/exec timed out/);
    await drive(t.clock, censusAfter(t.deps, before, CENSUS, ctx));
    expect(t.engine.calls).toHaveLength(1);
    expect(t.seen[0]).toMatchObject({ outcome: 'skipped', missing: [], added: [] });
  });

  it('no census configured: nothing is listed and nothing reported', async () => {
    const t = setup([]);
    const before = await censusBefore(t.deps, undefined, 'old');
    await censusAfter(t.deps, before, undefined, ctx);
    expect(t.engine.calls).toEqual([]);
    expect(t.seen).toEqual([]);
  });
});

describe('the census ledger (status view)', () => {
  it('shows a mismatch as lastError DOMAIN_CENSUS_MISMATCH and counts it; a later match clears the error', () => {
    const events = new EventBus();
    const ledger = new CensusLedger(events);
    const base = { type: 'census' as const, operationId: 'op', container: 'c', action: 'restart', added: [] };
    expect(ledger.view('c')).toBeUndefined();
    events.publish({
      ...base,
      at: 1000,
      outcome: 'mismatch',
      before: [U1],
      after: [],
      missing: [U1],
      detail: 'gone',
    });
    expect(ledger.error('c')).toMatchObject({ code: 'DOMAIN_CENSUS_MISMATCH', message: 'gone', atMs: 1000 });
    expect(ledger.view('c')).toMatchObject({ outcome: 'mismatch', before: 1, after: 0, mismatches: 1 });
    events.publish({
      ...base,
      at: 2000,
      outcome: 'ok',
      before: [U1],
      after: [U1],
      missing: [],
      detail: 'same',
    });
    expect(ledger.error('c')).toBeUndefined();
    expect(ledger.view('c')).toMatchObject({ outcome: 'ok', before: 1, after: 1, mismatches: 1 });
    expect(ledger.view('other')).toBeUndefined();
  });
});
