/** A pino destination that keeps each JSON line it is given, parsed, for tests that read the log. */
import { Writable } from 'node:stream';

export function logLines(): { lines: Record<string, unknown>[]; sink: Writable } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n').filter(Boolean))
        lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, sink };
}
