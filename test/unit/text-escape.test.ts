/**
 * One escaping helper for user and container text, and the CLI tables,
 * events and errors that use it: no ANSI sequence, CR or LF from a name, a
 * message or a check's output reaches the operator's terminal raw.
 */
import { describe, expect, it } from 'vitest';
import { formatEvent, formatHealth, formatPlan, formatStatus, oneLine } from '../../agent/cli/format.js';
import { escapeControl } from '../../agent/model/text.js';
import { demoContainer, FakeStatus } from '../support/api-fakes.js';

// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const NASTY = 'ok\x1b[2J\x1b]0;pwned\x07\rspcd: all healthy\nforged line\u009b31m\u202etxt\u2028';

describe('escapeControl', () => {
  it('escapes C0, DEL, C1, line separators and bidi overrides, one line', () => {
    expect(escapeControl(NASTY)).toBe(
      'ok\\x1b[2J\\x1b]0;pwned\\x07\\rspcd: all healthy\\nforged line\\x9b31m\\u202etxt\\u2028',
    );
    expect(escapeControl('\0\x7f\t')).toBe('\\x00\\x7f\\t');
  });

  it('keeps LF and TAB with keepLines, escapes the rest', () => {
    expect(escapeControl('a\tb\nc\r\x1b', { keepLines: true })).toBe('a\tb\nc\\r\\x1b');
  });

  it('leaves printable text alone and is idempotent', () => {
    const text = 'nova_compute: exit 1 — "é ü" 日本 \\x1b';
    expect(escapeControl(text)).toBe(text);
    expect(escapeControl(escapeControl(NASTY))).toBe(escapeControl(NASTY));
  });
});

describe('CLI output escapes what it shows', () => {
  it('health output, in the table and in one-line cells', () => {
    const text = formatHealth({
      name: 'web',
      status: 'unhealthy',
      checks: [
        {
          name: 'port',
          status: 'unhealthy',
          consecutiveFailures: 3,
          consecutiveSuccesses: 0,
          history: [
            {
              at: '2026-01-01T00:00:00Z',
              ok: false,
              exitCode: 1,
              timedOut: false,
              durationMs: 5,
              output: NASTY,
            },
          ],
        },
      ],
    } as unknown as Parameters<typeof formatHealth>[0]);
    expect(text).not.toMatch(RAW_CONTROL);
    expect(text).toContain('ok\\x1b[2J');
    expect(text.split('\n')).toHaveLength(4); // head, header row, one check row, trailing ""
    expect(oneLine(NASTY, 200)).not.toMatch(RAW_CONTROL);
  });

  it('container names, images and last errors in status', async () => {
    const status = new FakeStatus();
    const doc = await status.status();
    const set = doc.sets[0]!;
    const evil = demoContainer('web\x1b[31m', set.path, {
      lastError: { code: 'ENGINE_ERROR', message: 'engine said: \x1b[2Kfine\rreally' },
    } as Parameters<typeof demoContainer>[2]);
    const text = formatStatus({ ...doc, sets: [{ ...set, containers: [evil] }] });
    expect(text).not.toMatch(RAW_CONTROL);
    expect(text).toContain('web\\x1b[31m');
  });

  it('events, plan problems and diffs', () => {
    const line = formatEvent({
      type: 'health',
      at: 0,
      container: 'web',
      check: 'port',
      status: 'unhealthy',
      output: NASTY,
    });
    expect(line).not.toMatch(RAW_CONTROL);
    expect(line.split('\n')).toHaveLength(1);
    for (const e of [
      { type: 'reload', at: 0, ok: false, detail: NASTY },
      { type: 'engine', at: 0, available: false, reason: NASTY },
      {
        type: 'census',
        at: 0,
        operationId: 'op2',
        container: 'nova_libvirt',
        action: 'upgrade',
        outcome: 'mismatch',
        missing: [],
        added: [],
        detail: NASTY,
      },
      {
        type: 'operation',
        at: 0,
        operationId: 'op1',
        kind: 'upgrade',
        target: 'web',
        phase: 'failed',
        error: { code: 'X', message: NASTY },
      },
    ] as const) {
      const text = formatEvent(e);
      expect(text).not.toMatch(RAW_CONTROL);
      expect(text).toContain('pwned\\x07\\rspcd: all healthy\\nforged line');
    }
    const plan = formatPlan({
      items: [
        {
          container: 'web',
          set: 's',
          action: 'replace',
          reason: 'config\x1b[8m',
          fileDiffs: [{ file: 'a.conf', diff: '-old\n+new\x1b[2J\r\n' }],
        },
      ],
      problems: ['s.yaml:1: unknown key "\x1b[2J"'],
    } as unknown as Parameters<typeof formatPlan>[0]);
    expect(plan).not.toMatch(RAW_CONTROL);
    expect(plan).toContain('+new\\x1b[2J\\r\n');
  });
});
