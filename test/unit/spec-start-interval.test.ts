/**
 * A check's start_interval (Docker's name): the cadence within the start
 * period until the first success. Valid only with an interval schedule and a
 * start period, and never longer than the interval.
 */
import { describe, expect, it } from 'vitest';
import { cleanupAfterEach, container, loadOne, problemsOf } from '../fixtures/spec/helpers.js';

cleanupAfterEach();

const CHECK = '  - {name: x, exec: [/bin/true], interval: 1s, timeout: 900ms';

describe('start_interval', () => {
  it('is read in ms; absent, the check has none', async () => {
    const spec = await loadOne(
      container('healthchecks:', `${CHECK}, start_period: 60s, start_interval: 200ms}`),
    );
    expect(spec.healthchecks[0]?.startIntervalMs).toBe(200);
    const plain = await loadOne(container('healthchecks:', `${CHECK}, start_period: 60s}`));
    expect(plain.healthchecks[0]).not.toHaveProperty('startIntervalMs');
  });

  it.each([
    [
      'without a start period',
      `${CHECK}, start_interval: 200ms}`,
      'start_interval needs a start_period (it applies only within it)',
    ],
    [
      'longer than the interval',
      `${CHECK}, start_period: 60s, start_interval: 2s}`,
      'start_interval (2000 ms) must not be longer than interval (1000 ms)',
    ],
    [
      'with a cron schedule',
      '  - {name: x, exec: [/bin/true], cron: "* * * * *", start_period: 60s, start_interval: 200ms}',
      'start_interval needs an interval schedule, not cron',
    ],
  ])('is refused %s, naming the field', async (_what, line, message) => {
    const problems = await problemsOf(container('healthchecks:', line));
    expect(problems.map((p) => `${p.where}: ${p.message}`)).toEqual([
      `s.yaml:6: containers.web.healthchecks[0].start_interval: ${message}`,
    ]);
  });

  it('is refused under 100 ms', async () => {
    const problems = await problemsOf(
      container('healthchecks:', `${CHECK}, start_period: 60s, start_interval: 10ms}`),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]?.where).toBe('s.yaml:6: containers.web.healthchecks[0].start_interval');
  });
});
