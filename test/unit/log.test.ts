import { createRequire } from 'node:module';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, logFormatFor } from '../../agent/log.js';

const require = createRequire(import.meta.url);
const prettyLoaded = (): boolean => Object.keys(require.cache).some((k) => k.includes('/pino-pretty/'));

/** A destination that collects what is written; a terminal when tty is true. */
function sink(tty: boolean): { stream: PassThrough & { isTTY?: boolean }; text: () => string } {
  const stream = new PassThrough() as PassThrough & { isTTY?: boolean };
  if (tty) stream.isTTY = true;
  const chunks: Buffer[] = [];
  stream.on('data', (b: Buffer) => chunks.push(b));
  return { stream, text: () => Buffer.concat(chunks).toString('utf8') };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));
const record = { room: 'reconciler', container: 'nova_compute', exitCode: 137, restartInMs: 2000 };
const failure = {
  room: 'executor',
  container: 'nova_compute',
  code: 'ENGINE_TIMEOUT',
  err: 'inspect took 10 s',
};

// In this order: the JSON case must run before anything loads pino-pretty into this process.
describe('logs for machines and for humans', () => {
  it('writes JSON to a pipe and never loads pino-pretty for it', async () => {
    expect(prettyLoaded()).toBe(false);
    const s = sink(false);
    const log = createLogger({ destination: s.stream, env: {} });
    log.child({ room: 'reconciler' }).warn({ ...record, room: undefined }, 'container exited');
    await flush();
    const line = JSON.parse(s.text().trim()) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 40, svc: 'spcd', msg: 'container exited', ...record });
    expect(prettyLoaded()).toBe(false);
  });

  it('writes readable lines with the same fields to a terminal', async () => {
    const json = sink(false);
    const tty = sink(true);
    for (const s of [json, tty]) {
      const log = createLogger({ destination: s.stream, env: { NO_COLOR: '1' } });
      log.warn(record, 'container exited');
      log.info({ container: 'x' }, 'second');
      log.error(failure, 'step failed');
    }
    await flush();
    expect(prettyLoaded()).toBe(true);
    const lines = tty.text().trimEnd().split('\n');
    expect(lines).toHaveLength(4); // one line a record, and an error's value on its own line below
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: container exited \{/);
    expect(lines[0]).not.toContain('\u001b['); // NO_COLOR
    // every field of the JSON record, with its value, is on the readable line
    const fields = JSON.parse(json.text().split('\n')[0]!) as Record<string, unknown>;
    for (const [k, v] of Object.entries(fields)) {
      if (k === 'time' || k === 'level' || k === 'msg') continue;
      expect(lines[0], k).toContain(`"${k}":${JSON.stringify(v)}`);
    }
    expect(lines[2]).toMatch(
      / ERROR: step failed \{"svc":"spcd","room":"executor","container":"nova_compute","code":"ENGINE_TIMEOUT"\}$/,
    );
    expect(lines[3]).toBe('    err: "inspect took 10 s"');
  });

  it('takes SPCD_LOG_FORMAT over the terminal test', () => {
    const tty = sink(true).stream;
    const pipe = sink(false).stream;
    expect(logFormatFor(tty, {})).toBe('pretty');
    expect(logFormatFor(pipe, {})).toBe('json');
    expect(logFormatFor(tty, { SPCD_LOG_FORMAT: 'json' })).toBe('json');
    expect(logFormatFor(pipe, { SPCD_LOG_FORMAT: 'pretty' })).toBe('pretty');
    expect(logFormatFor(pipe, { SPCD_LOG_FORMAT: 'auto' })).toBe('json');
  });
});
