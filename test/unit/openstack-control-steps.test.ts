/**
 * What the OpenStack e2e's step 8 restarts and step 9 upgrades
 * (test/e2e/openstack-control-steps.ts): the containers of a set file, nested
 * sets included, in file order and without the template's name prefix; and
 * the control and network sets' checks run at once after a start
 * (start_interval), which keeps the restarts' waits for "healthy" short.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { setMembers, TEMPLATE_PREFIX } from '../e2e/openstack-control-steps.js';
import { COMPUTE_SET, CONTROL_SET, NETWORK_SET } from '../e2e/openstack-e2e-harness.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const file = (text: string): string => {
  const d = mkdtempSync(join(tmpdir(), 'ctlsteps-'));
  dirs.push(d);
  writeFileSync(join(d, 'set.yaml'), text);
  return join(d, 'set.yaml');
};

describe('setMembers', () => {
  it('lists top-level containers first, then each nested set depth-first, prefix stripped', () => {
    const f = file(
      [
        'set: outer',
        'containers:',
        `  ${TEMPLATE_PREFIX}db: { image: x }`,
        '  plain: { image: x }',
        'sets:',
        '  a:',
        '    containers:',
        `      ${TEMPLATE_PREFIX}api: { image: x }`,
        '    sets:',
        '      deep:',
        `        containers: { ${TEMPLATE_PREFIX}worker: { image: x } }`,
        '  b:',
        `    containers: { ${TEMPLATE_PREFIX}agent: { image: x } }`,
      ].join('\n'),
    );
    expect(setMembers(f)).toEqual({ set: 'outer', containers: ['db', 'plain', 'api', 'worker', 'agent'] });
  });

  it('refuses a file without a set name, naming the file', () => {
    const f = file('containers: { a: { image: x } }\n');
    expect(() => setMembers(f)).toThrow(`${f}: no "set" name`);
  });

  it('reads the e2e sets: every container once, names as the test renders them', () => {
    for (const path of [CONTROL_SET, NETWORK_SET]) {
      const { set, containers } = setMembers(path);
      const text = readFileSync(path, 'utf8');
      expect(text).toContain(`set: ${set}`);
      expect(new Set(containers).size).toBe(containers.length);
      for (const c of containers) expect(text).toContain(`  ${TEMPLATE_PREFIX}${c}:`);
      expect(text.split(`\n`).filter((l) => /^\s+spcd_e2e_os_\w+:$/.test(l)).length).toBe(containers.length);
    }
  });

  it('reads the shipped compute set the e2e runs: its set, nested set included, names as shipped', () => {
    expect(setMembers(COMPUTE_SET)).toEqual({
      set: 'compute',
      containers: ['nova_libvirt', 'nova_compute', 'neutron_linuxbridge_agent'],
    });
  });
});

interface Check {
  name: string;
  start_period?: string;
  start_interval?: string;
}
interface Doc {
  containers?: Record<string, { healthchecks?: Check[] }>;
  sets?: Record<string, Doc>;
}

describe('the control and network sets after a restart', () => {
  it('every container has a check, each runs at once and every second in its start period', () => {
    for (const path of [CONTROL_SET, NETWORK_SET]) {
      const checks: string[] = [];
      const walk = (d: Doc): void => {
        for (const [name, c] of Object.entries(d.containers ?? {})) {
          // restartHealthy waits for a passing result of each check after the stop.
          expect(c.healthchecks?.length, `${path}: ${name} has no health check`).toBeGreaterThan(0);
          for (const h of c.healthchecks ?? []) {
            expect(h.start_period, `${path}: ${name}.${h.name}`).toBeDefined();
            expect(h.start_interval, `${path}: ${name}.${h.name}`).toBe('1s');
            checks.push(`${name}.${h.name}`);
          }
        }
        for (const s of Object.values(d.sets ?? {})) walk(s);
      };
      walk(yaml.load(readFileSync(path, 'utf8')) as Doc);
      expect(checks.length).toBeGreaterThan(0);
    }
  });
});
