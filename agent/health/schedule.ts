/**
 * When a check runs next. Both kinds are driven by the injected Clock (the
 * worker sets the timers), so unit tests drive them with a fake clock.
 * Cron expressions are parsed and matched by node-cron.
 */
import cron, { type ScheduledTask } from 'node-cron';
import type { CheckSchedule } from '../model/spec.js';

export interface Schedule {
  /** Absolute time of the first run of a fresh worker. */
  first(nowMs: number): number;
  /** Absolute time of the run after the one that started at lastStartMs (may be <= now: run at once). */
  next(lastStartMs: number, nowMs: number): number;
  close(): void;
}

/** Fixed rate; the first run is jittered uniformly in [0, interval). */
export class IntervalSchedule implements Schedule {
  constructor(
    private readonly intervalMs: number,
    private readonly random: () => number,
  ) {}

  first(nowMs: number): number {
    return nowMs + Math.floor(Math.min(Math.max(this.random(), 0), 0.999999) * this.intervalMs);
  }

  next(lastStartMs: number): number {
    return lastStartMs + this.intervalMs;
  }

  close(): void {}
}

/** Runs at each time the cron expression matches (local time; seconds field optional). */
export class CronSchedule implements Schedule {
  private readonly task: ScheduledTask;
  private readonly fields: ReturnType<typeof cron.parse>;

  constructor(expression: string) {
    this.fields = cron.parse(expression);
    // A stopped task: used only for its matcher; destroyed in close().
    this.task = cron.createTask(expression, () => undefined);
  }

  first(nowMs: number): number {
    return nextCronMatch(this.fields, (d) => this.task.match(d), nowMs);
  }

  next(_lastStartMs: number, nowMs: number): number {
    return nextCronMatch(this.fields, (d) => this.task.match(d), nowMs);
  }

  close(): void {
    void this.task.destroy();
  }
}

/**
 * The first whole second strictly after fromMs that the expression matches.
 * Walks month -> day -> hour -> minute -> second, skipping non-matching units;
 * day-of-month/day-of-week (which may hold L or nth-weekday tokens) are decided
 * by node-cron's own matcher.
 */
export function nextCronMatch(
  f: ReturnType<typeof cron.parse>,
  match: (d: Date) => boolean,
  fromMs: number,
): number {
  const first = (xs: readonly number[]): number => xs[0] ?? 0;
  let d = new Date(Math.floor(fromMs / 1000) * 1000 + 1000);
  for (let guard = 0; guard < 200_000; guard++) {
    const [y, mo, day, h, mi, s] = [
      d.getFullYear(),
      d.getMonth(),
      d.getDate(),
      d.getHours(),
      d.getMinutes(),
      d.getSeconds(),
    ];
    if (!f.month.includes(mo + 1)) {
      d = new Date(y, mo + 1, 1, 0, 0, 0);
      continue;
    }
    if (!match(new Date(y, mo, day, first(f.hour), first(f.minute), first(f.second)))) {
      d = new Date(y, mo, day + 1, 0, 0, 0);
      continue;
    }
    if (!f.hour.includes(h)) {
      d = new Date(y, mo, day, h + 1, 0, 0);
      continue;
    }
    if (!f.minute.includes(mi)) {
      d = new Date(y, mo, day, h, mi + 1, 0);
      continue;
    }
    const sec = f.second.find((x) => x >= s);
    if (sec === undefined) {
      d = new Date(y, mo, day, h, mi + 1, 0);
      continue;
    }
    const candidate = new Date(y, mo, day, h, mi, sec);
    if (match(candidate)) return candidate.getTime();
    d = new Date(candidate.getTime() + 1000);
  }
  // An expression that never matches (e.g. 31 February): effectively never.
  return Number.MAX_SAFE_INTEGER;
}

export function makeSchedule(s: CheckSchedule, random: () => number): Schedule {
  return s.kind === 'interval' ? new IntervalSchedule(s.intervalMs, random) : new CronSchedule(s.expression);
}
