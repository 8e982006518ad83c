import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { PrettyOptions } from 'pino-pretty';

export type { Logger };

/** How records are written: `json` (journald, pipes, files) or `pretty` (readable lines). */
export type LogFormat = 'json' | 'pretty';

type Destination = NodeJS.WritableStream & { isTTY?: boolean };

/**
 * JSON unless the destination is a terminal, or SPCD_LOG_FORMAT says
 * otherwise (`json`, `pretty`, `auto`: the default).
 */
export function logFormatFor(destination: Destination, env: NodeJS.ProcessEnv = process.env): LogFormat {
  const asked = env.SPCD_LOG_FORMAT;
  if (asked === 'json' || asked === 'pretty') return asked;
  return destination.isTTY === true ? 'pretty' : 'json';
}

/**
 * The one place a root logger is made; main.ts calls it and passes it down.
 * Records are JSON (one object a line) for journald and pipes; on a terminal
 * they are readable lines with the same fields (an error under its record,
 * indented), written by pino-pretty, which is loaded only then (a daemon
 * under systemd never loads it).
 */
export function createLogger(
  opts: { level?: string; destination?: Destination; env?: NodeJS.ProcessEnv } = {},
): Logger {
  const env = opts.env ?? process.env;
  const destination = opts.destination ?? process.stderr;
  const options = {
    level: opts.level ?? env.SPCD_LOG_LEVEL ?? 'info',
    base: { svc: 'spcd' },
    redact: { paths: ['*.password', '*.secret', '*.secrets', 'auth.password'], censor: '[redacted]' },
  };
  if (logFormatFor(destination, env) === 'json') return pino(options, destination);
  return pino(options, prettyStream(destination, env));
}

/** pino-pretty writing to the destination, loaded on this call only. */
function prettyStream(destination: Destination, env: NodeJS.ProcessEnv): DestinationStream {
  const build = createRequire(import.meta.url)('pino-pretty') as (o: PrettyOptions) => DestinationStream;
  return build({
    destination,
    sync: true, // in order with the daemon's own stderr lines, and nothing lost at exit
    colorize: destination.isTTY === true && env.NO_COLOR === undefined,
    translateTime: 'SYS:HH:MM:ss.l',
    singleLine: true, // one record, one line: its fields after the message (an `err` on the lines below)
    ignore: '',
  });
}

/** A logger that writes nothing, for unit tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
