import { describe, expect, it } from 'vitest';
import { ledgerFromJson, phaseFromJson } from '../../agent/rollout/records.js';

describe('the rollout records read from their stored text (both backends)', () => {
  it('a ledger reads back whole; canaries default to none', () => {
    const ledger = { rollout: 'r1', canaries: { n1: 'done' }, failed: ['n2'] };
    expect(ledgerFromJson(JSON.stringify(ledger))).toEqual(ledger);
    expect(ledgerFromJson('{"rollout":"r1","canaries":null,"failed":[]}')).toEqual({
      rollout: 'r1',
      canaries: {},
      failed: [],
    });
  });

  it('a phase report reads back whole', () => {
    const report = { node: 'n1', phase: 'done', rollout: 'r1', at: 5 };
    expect(phaseFromJson(JSON.stringify(report))).toEqual(report);
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['not JSON', '{"rollout":'],
    ['JSON null', 'null'],
    ['a number', '3'],
    ['a string', '"r1"'],
    ['no failed list', '{"rollout":"r1","canaries":{}}'],
    ['a numeric rollout id', '{"rollout":1,"canaries":{},"failed":[]}'],
  ])('a ledger that is %s reads as none', (_what, text) => {
    expect(ledgerFromJson(text)).toBeUndefined();
  });

  it.each([
    ['not JSON', 'phase'],
    ['JSON null', 'null'],
    ['without a node', '{"phase":"done","rollout":"r1"}'],
    ['with a numeric phase', '{"node":"n1","phase":3,"rollout":"r1"}'],
  ])('a phase report that is %s reads as none', (_what, text) => {
    expect(phaseFromJson(text)).toBeUndefined();
  });
});
