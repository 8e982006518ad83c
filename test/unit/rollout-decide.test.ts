import { describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import {
  admitCanary,
  decide,
  emptyLedger,
  ledgerFor,
  summarize,
  withCanary,
  withFailure,
  type PhaseReport,
} from '../../agent/rollout/decide.js';
import { parseRollout } from '../../agent/rollout/spec.js';
import { isOpen, opensAt, windowState, parseWindow } from '../../agent/rollout/windows.js';

const DEF = { maxConcurrent: 10, id: 't-abc' };
const SRC = 'ConfigMap spcd-system/spcd-desired key "rollout"';
const at = (iso: string): number => Date.parse(iso);

function problem(raw: unknown): { field: unknown; message: string } {
  try {
    parseRollout(raw, DEF, SRC);
  } catch (err) {
    if (isSpcdError(err, 'SPEC_INVALID')) return { field: err.details.field, message: err.message };
    throw err;
  }
  throw new Error('expected SPEC_INVALID');
}

describe('the rollout object', () => {
  it('absent: the node defaults (N = --fleet-slots, no canary, no budget, always open)', () => {
    expect(parseRollout(undefined, DEF, SRC)).toEqual({
      id: 't-abc',
      maxConcurrent: 10,
      paused: false,
      windows: [],
    });
  });

  it('reads every field', () => {
    const s = parseRollout(
      {
        id: 'nova-29.1',
        maxConcurrent: 5,
        canary: { nodes: 3, soak: '10m' },
        failureBudget: { maxFailed: 2, maxFailedPercent: 5 },
        paused: true,
        windows: [
          { cron: '0 22 * * 1-5', duration: '6h' },
          { from: '2026-11-28T22:00:00Z', to: '2026-11-29T06:00:00Z' },
        ],
      },
      DEF,
      SRC,
    );
    expect(s).toMatchObject({
      id: 'nova-29.1',
      maxConcurrent: 5,
      canary: { nodes: 3, soakMs: 600_000 },
      failureBudget: { maxFailed: 2, maxFailedPercent: 5 },
      paused: true,
    });
    expect(s.windows.map((w) => w.kind)).toEqual(['cron', 'range']);
  });

  it.each([
    [{ maxConcurrent: 0 }, 'rollout.maxConcurrent', 'whole number >= 1'],
    [{ maxConcurent: 3 }, 'rollout.maxConcurent', 'is not a field'],
    [{ id: 'Nova 29' }, 'rollout.id', 'a-z 0-9'],
    [{ canary: { nodes: 'two' } }, 'rollout.canary.nodes', 'whole number'],
    [{ canary: { nodes: 2, soak: 'soon' } }, 'rollout.canary.soak', 'duration'],
    [{ failureBudget: {} }, 'rollout.failureBudget', 'maxFailed or maxFailedPercent'],
    [{ failureBudget: { maxFailedPercent: 150 } }, 'rollout.failureBudget.maxFailedPercent', '(0, 100]'],
    [{ paused: 'yes' }, 'rollout.paused', 'true or false'],
    [{ windows: { cron: '* * * * *' } }, 'rollout.windows', 'list'],
    [{ windows: [{ cron: '0 25 * * *', duration: '1h' }] }, 'rollout.windows[0].cron', 'hour'],
    [{ windows: [{ cron: '0 22 * *', duration: '1h' }] }, 'rollout.windows[0].cron', '5-field'],
    [{ windows: [{ cron: '0 22 * * *' }] }, 'rollout.windows[0].duration', 'duration'],
    [
      { windows: [{ cron: '0 22 * * *', duration: '2h', timezone: 'Mars/Olympus' }] },
      'rollout.windows[0].timezone',
      'IANA',
    ],
    [
      { windows: [{ from: '2026-11-29T06:00:00Z', to: '2026-11-28T22:00:00Z' }] },
      'rollout.windows[0].to',
      'after from',
    ],
    [{ windows: [{ from: 'tomorrow', to: '2026-11-28T22:00:00Z' }] }, 'rollout.windows[0].from', 'RFC 3339'],
    [
      { windows: [{ cron: '0 22 * * *', duration: '1h', every: 'day' }] },
      'rollout.windows[0].every',
      'not a field',
    ],
  ])('rejects %j naming %s', (raw, field, words) => {
    const p = problem(raw);
    expect(p.field).toBe(field);
    expect(p.message.startsWith(`${SRC}: ${String(field)} `)).toBe(true);
    expect(p.message).toContain(words);
  });
});

describe('maintenance windows', () => {
  const weeknights = parseWindow({ cron: '0 22 * * 1-5', duration: '4h' });

  it('a cron window is open from each start for its duration, across midnight', () => {
    // 2026-11-23 is a Monday
    expect(isOpen(weeknights, at('2026-11-23T21:59:59Z'))).toBe(false);
    expect(isOpen(weeknights, at('2026-11-23T22:00:00Z'))).toBe(true);
    expect(isOpen(weeknights, at('2026-11-24T01:59:59Z'))).toBe(true);
    expect(isOpen(weeknights, at('2026-11-24T02:00:00Z'))).toBe(false);
    // Friday's window runs into Saturday; Saturday's own evening is closed
    expect(isOpen(weeknights, at('2026-11-28T01:30:00Z'))).toBe(true);
    expect(isOpen(weeknights, at('2026-11-28T22:30:00Z'))).toBe(false);
  });

  it('reads the cron on the wall clock of its time zone', () => {
    const berlin = parseWindow({ cron: '0 22 * * *', duration: '1h', timezone: 'Europe/Berlin' });
    // November: Berlin is UTC+1, so 22:00 there is 21:00 UTC
    expect(isOpen(berlin, at('2026-11-24T21:30:00Z'))).toBe(true);
    expect(isOpen(berlin, at('2026-11-24T22:30:00Z'))).toBe(false);
    // July: UTC+2
    expect(isOpen(berlin, at('2026-07-01T20:30:00Z'))).toBe(true);
  });

  it('says when a closed window opens next', () => {
    expect(opensAt(weeknights, at('2026-11-28T12:00:00Z'))).toBe(at('2026-11-30T22:00:00Z'));
    const range = parseWindow({ from: '2026-12-01T00:00:00Z', to: '2026-12-01T06:00:00Z' });
    expect(opensAt(range, at('2026-11-30T00:00:00Z'))).toBe(at('2026-12-01T00:00:00Z'));
    expect(opensAt(range, at('2026-12-02T00:00:00Z'))).toBeUndefined();
    expect(windowState([range, weeknights], at('2026-11-28T12:00:00Z'))).toEqual({
      open: false,
      opensAt: at('2026-11-30T22:00:00Z'),
    });
    expect(windowState([], 0)).toEqual({ open: true });
  });
});

describe('decide: may this node start now?', () => {
  const spec = parseRollout(
    { canary: { nodes: 2, soak: '5m' }, failureBudget: { maxFailed: 3, maxFailedPercent: 10 } },
    DEF,
    SRC,
  );
  const now = at('2026-11-24T03:00:00Z');

  it('the first C nodes are canaries, the rest wait until every canary passed', () => {
    let l = emptyLedger('t-abc');
    expect(decide(spec, l, 'a', now)).toEqual({ kind: 'start', canary: true });
    l = admitCanary(spec, l, 'a')!;
    l = admitCanary(spec, l, 'b')!;
    expect(admitCanary(spec, l, 'c')).toBeUndefined();
    expect(decide(spec, l, 'c', now)).toMatchObject({ kind: 'hold', reason: 'canary-running' });
    expect(decide(spec, l, 'a', now)).toEqual({ kind: 'start', canary: true }); // its own place, after a restart
    l = withCanary(withCanary(l, 'a', 'passed'), 'b', 'soaking');
    expect(decide(spec, l, 'c', now)).toMatchObject({ kind: 'hold', reason: 'canary-running' });
    l = withCanary(l, 'b', 'passed');
    expect(decide(spec, l, 'c', now)).toEqual({ kind: 'start', canary: false });
  });

  it('a failed canary halts the fleet and counts toward the budget', () => {
    const l = withCanary(admitCanary(spec, emptyLedger('t-abc'), 'a')!, 'a', 'failed');
    expect(l.failed).toEqual(['a']);
    expect(decide(spec, l, 'c', now)).toMatchObject({ kind: 'hold', reason: 'canary-failed' });
  });

  it('the budget: K failures, or a percentage of the nodes seen', () => {
    const noCanary = parseRollout({ failureBudget: { maxFailed: 2 } }, DEF, SRC);
    let l = withFailure(emptyLedger('t-abc'), 'x');
    expect(withFailure(l, 'x')).toBe(l); // counted once
    expect(decide(noCanary, l, 'c', now).kind).toBe('start');
    l = withFailure(l, 'y');
    expect(decide(noCanary, l, 'c', now)).toMatchObject({ kind: 'hold', reason: 'budget-exhausted' });
    const pct = parseRollout({ failureBudget: { maxFailedPercent: 10 } }, DEF, SRC);
    const one = withFailure(emptyLedger('t-abc'), 'x');
    expect(decide(pct, one, 'c', now, 20).kind).toBe('start'); // 5 %
    expect(decide(pct, one, 'c', now, 10)).toMatchObject({ reason: 'budget-exhausted' }); // 10 %
  });

  it('paused, and a closed window with the time it opens', () => {
    expect(decide(parseRollout({ paused: true }, DEF, SRC), emptyLedger('t-abc'), 'a', now)).toEqual({
      kind: 'hold',
      phase: 'paused',
      reason: 'paused',
    });
    const w = parseRollout({ windows: [{ cron: '0 22 * * *', duration: '2h' }] }, DEF, SRC);
    expect(decide(w, emptyLedger('t-abc'), 'a', now)).toEqual({
      kind: 'hold',
      phase: 'held',
      reason: 'window-closed',
      recheckAt: at('2026-11-24T22:00:00Z'),
    });
  });

  it('a ledger of another rollout counts as empty', () => {
    const old = withFailure(emptyLedger('t-old'), 'x');
    expect(ledgerFor('t-abc', old)).toEqual(emptyLedger('t-abc'));
  });

  it('summarizes the rollout from every node report', () => {
    const r = (node: string, phase: PhaseReport['phase']): PhaseReport => ({
      node,
      rollout: 't-abc',
      phase,
      since: 0,
    });
    const l = withCanary(
      withCanary(admitCanary(spec, emptyLedger('t-abc'), 'a')!, 'a', 'passed'),
      'b',
      'passed',
    );
    const s = summarize(spec, l, [
      r('a', 'done'),
      r('b', 'done'),
      r('c', 'upgrading'),
      r('d', 'queued'),
      { ...r('e', 'done'), rollout: 't-old' },
    ]);
    expect(s).toMatchObject({ state: 'rolling', nodes: 4, counts: { done: 2, upgrading: 1, queued: 1 } });
    expect(summarize(spec, l, [r('a', 'done'), r('b', 'done')]).state).toBe('complete');
    expect(summarize(spec, withCanary(l, 'c', 'failed'), []).state).toBe('halted');
  });
});
