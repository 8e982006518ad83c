/**
 * The shipped alert rules through the real promtool: they load
 * (`check rules`), and each alert fires on the series that mean trouble and
 * not on those that do not (`test rules` with deploy/prometheus/spcd-alerts.test.yaml).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/daemon.js';

const run = promisify(execFile);
const dir = join(REPO, 'deploy/prometheus');

async function promtool(...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout, stderr } = await run('promtool', args, { cwd: dir });
    return { code: 0, out: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

describe('deploy/prometheus/spcd-alerts.yaml', () => {
  it('passes promtool check rules', async () => {
    const r = await promtool('check', 'rules', 'spcd-alerts.yaml');
    expect(r.out).toContain('SUCCESS: 10 rules found');
    expect(r.code).toBe(0);
  });

  it('passes promtool test rules, with a test for every alert', async () => {
    const rules = yaml.load(readFileSync(join(dir, 'spcd-alerts.yaml'), 'utf8')) as {
      groups: { rules: { alert: string }[] }[];
    };
    const tests = yaml.load(readFileSync(join(dir, 'spcd-alerts.test.yaml'), 'utf8')) as {
      tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
    };
    const cases = tests.tests.flatMap((t) => t.alert_rule_test);
    for (const a of rules.groups.flatMap((g) => g.rules.map((x) => x.alert))) {
      // each alert is tested both firing and quiet
      expect(
        cases.some((c) => c.alertname === a && c.exp_alerts.length > 0),
        `${a} fires`,
      ).toBe(true);
      expect(
        cases.some((c) => c.alertname === a && c.exp_alerts.length === 0),
        `${a} quiet`,
      ).toBe(true);
    }
    const r = await promtool('test', 'rules', 'spcd-alerts.test.yaml');
    expect(r.out).toContain('SUCCESS');
    expect(r.code).toBe(0);
  });
});
