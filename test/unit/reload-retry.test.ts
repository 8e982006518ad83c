import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ReloadRetry } from '../../agent/config/reload-retry.js';
import { FakeClock } from '../support/fake-clock.js';

const quiet = pino({ level: 'silent' });

function setup() {
  const clock = new FakeClock();
  const attempts: number[] = [];
  const retry = new ReloadRetry(clock, quiet, async () => {
    attempts.push(clock.now());
  });
  return { clock, attempts, retry, t0: clock.now() };
}

describe('a reload that failed on a full disk is tried again', () => {
  it('after 2 s, then 4 s, 8 s ... up to 60 s, and from 2 s again after a success', async () => {
    const { clock, attempts, retry, t0 } = setup();
    retry.failed('STATE_WRITE_FAILED');
    clock.advance(1_999);
    expect(attempts).toEqual([]);
    clock.advance(1);
    expect(attempts).toEqual([t0 + 2_000]);
    retry.failed('CONFIG_WRITE_FAILED');
    clock.advance(4_000);
    expect(attempts).toEqual([t0 + 2_000, t0 + 6_000]);
    for (let i = 0; i < 6; i++) {
      retry.failed('STATE_WRITE_FAILED');
      retry.begin();
    }
    retry.failed('STATE_WRITE_FAILED');
    clock.advance(59_999);
    expect(attempts).toHaveLength(2);
    clock.advance(1);
    expect(attempts).toHaveLength(3);
    retry.succeeded();
    retry.failed('STATE_WRITE_FAILED');
    clock.advance(2_000);
    expect(attempts).toHaveLength(4);
  });

  it('not for a failure that waits for the operator, and not once another reload began or spcd stops', async () => {
    const { clock, attempts, retry } = setup();
    retry.failed('SPEC_INVALID');
    clock.advance(120_000);
    expect(attempts).toEqual([]);
    retry.failed('STATE_WRITE_FAILED');
    retry.begin();
    clock.advance(120_000);
    expect(attempts).toEqual([]);
    retry.failed('STATE_WRITE_FAILED');
    retry.close();
    clock.advance(120_000);
    expect(attempts).toEqual([]);
  });
});
