import { describe, expect, it } from 'vitest';
import { reloadResultLines, UNREADABLE_RELOAD_RESULT } from '../../agent/cli/reload-result.js';

const recover = (container: string, outcome: string, operationId: string) => ({
  operationId,
  kind: 'recover',
  container,
  outcome,
});

describe('reloadResultLines (spcctl reload --wait)', () => {
  it('names the counts, the containers still quarantined and each operation the reload caused', () => {
    const lines = reloadResultLines({
      containers: 12,
      changes: [
        { kind: 'recreate', reason: 'image changed' },
        { kind: 'recover', reason: 'journal entry tried again' },
        { kind: 'recreate', reason: 'config changed' },
      ],
      quarantined: ['nova_libvirt'],
      operations: [
        recover('cron', 'cleared', 'reload-recover-1a2b3c4d'),
        recover('nova_libvirt', 'quarantined', 'reload-recover-5e6f7a8b'),
      ],
    });
    expect(lines).toEqual([
      'reload: 12 containers defined; 3 changes planned (recreate 2, recover 1)',
      'still quarantined: nova_libvirt',
      'operations caused by the reload:',
      '  recover cron: cleared (operation reload-recover-1a2b3c4d)',
      '  recover nova_libvirt: quarantined (operation reload-recover-5e6f7a8b)',
    ]);
  });

  it('says when the reload changed nothing and caused no operation', () => {
    expect(reloadResultLines({ containers: 1, changes: [], operations: [] })).toEqual([
      'reload: 1 container defined; no changes planned',
      'operations caused by the reload: none',
    ]);
    expect(
      reloadResultLines({
        containers: 0,
        changes: [{ kind: 'stop', reason: 'definition deleted' }],
        operations: [],
      }),
    ).toEqual([
      'reload: 0 containers defined; 1 change planned (stop 1)',
      'operations caused by the reload: none',
    ]);
  });

  it('prints one line, and does not throw, for a result it cannot read', () => {
    const ok = { containers: 2, changes: [], operations: [] };
    for (const bad of [
      undefined,
      null,
      'reloaded',
      [],
      {},
      { ...ok, containers: -1 },
      { ...ok, containers: 1.5 },
      { ...ok, changes: 'none' },
      { ...ok, changes: [{ reason: 'no kind' }] },
      { ...ok, quarantined: 'cron' },
      { ...ok, quarantined: [7] },
      { containers: 2, changes: [] },
      { ...ok, operations: [null] },
      { ...ok, operations: [{ operationId: 'x', kind: 'recover', container: 'cron' }] },
    ]) {
      expect(reloadResultLines(bad), JSON.stringify(bad)).toEqual([UNREADABLE_RELOAD_RESULT]);
    }
    expect(UNREADABLE_RELOAD_RESULT).toBe('reload: succeeded, but its result could not be read');
  });

  it('shows the control characters of names from the daemon escaped', () => {
    const lines = reloadResultLines({
      containers: 1,
      changes: [],
      operations: [recover('cron\x1b[2J', 'cleared\nnext', 'op-1')],
    });
    expect(lines[2]).toBe('  recover cron\\x1b[2J: cleared\\nnext (operation op-1)');
    for (const raw of ['\x1b', '\n']) expect(lines.join('')).not.toContain(raw);
  });
});
