import { pino, type Logger } from 'pino';

export type { Logger };

/** The one place a root logger is made; main.ts calls it and passes it down. */
export function createLogger(opts: { level?: string; destination?: NodeJS.WritableStream } = {}): Logger {
  return pino(
    {
      level: opts.level ?? process.env.SPCD_LOG_LEVEL ?? 'info',
      base: { svc: 'spcd' },
      redact: { paths: ['*.password', '*.secret', '*.secrets', 'auth.password'], censor: '[redacted]' },
    },
    opts.destination ?? process.stderr,
  );
}

/** A logger that writes nothing, for unit tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
