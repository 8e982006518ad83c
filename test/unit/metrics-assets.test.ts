/**
 * The shipped dashboard, alert rules and metrics reference name only the
 * families spcd declares, and the reference names every one of them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { createApiHandler } from '../../agent/api/handler.js';
import { MetricsRegistry } from '../../agent/api/registry.js';
import { registerDaemonMetrics } from '../../agent/status/metrics.js';
import { silentLogger } from '../../agent/log.js';
import { EventBus } from '../../agent/model/events.js';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';
import { REPO } from '../support/daemon.js';

/** Every family /metrics has, registered as the daemon does (daemon.ts, then serve-api.ts). */
function declared(): Map<string, string> {
  const registry = new MetricsRegistry();
  registerDaemonMetrics({
    registry,
    events: new EventBus(),
    health: { onFailure: () => () => undefined, dependencies: () => [] },
    engineAvailable: () => true,
    definitionsLoaded: () => true,
    quarantined: () => 0,
  });
  const status = new FakeStatus();
  createApiHandler({
    status,
    actions: new FakeActions(status),
    log: silentLogger(),
    version: 't',
    metrics: registry,
  });
  return new Map(registry.declared().map((f) => [f.name, f.type]));
}

const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'and',
  'or',
  'unless',
]);

/** The metric names a PromQL expression reads (not its functions, keywords, labels or strings). */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // label values
    .replace(/\{[^}]*\}/g, ' ') // matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // grouping labels
    .replace(/\$\{?\w+\}?/g, ' ') // Grafana variables
    .replace(/\b\d+(\.\d+)?([smhdwy]|ms)?\b/g, ' '); // numbers and durations
  const names: string[] = [];
  for (const m of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?/g)) {
    if (m[1]) continue; // a function call
    const word = m[0].trim();
    if (KEYWORDS.has(word) || /^\d/.test(word)) continue;
    names.push(word);
  }
  return names;
}

/** The family a series name belongs to (a histogram's _bucket, _sum, _count). */
function familyOf(name: string, families: Map<string, string>): string | undefined {
  if (families.has(name)) return name;
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return families.get(base) === 'histogram' ? base : undefined;
}

describe('the metrics assets', () => {
  const families = declared();

  it('reads names out of PromQL', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (route, le) (rate(spcd_api_request_duration_seconds_bucket{instance=~"$instance"}[$__rate_interval])))',
      ),
    ).toEqual(['spcd_api_request_duration_seconds_bucket']);
    expect(metricNames('(x unless x offset 15m) and on (job, instance) up offset 15m')).toEqual([
      'x',
      'x',
      'up',
    ]);
  });

  it('the Grafana dashboard is JSON whose every panel query names only families spcd exports', () => {
    const d = JSON.parse(readFileSync(join(REPO, 'deploy/grafana/spcd-dashboard.json'), 'utf8')) as {
      panels: { title: string; targets?: { expr: string }[] }[];
    };
    expect(d.panels.length).toBeGreaterThan(5);
    const used = new Set<string>();
    for (const p of d.panels) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets ?? []) {
        const names = metricNames(t.expr);
        expect(names.length, `${p.title}: ${t.expr}`).toBeGreaterThan(0);
        for (const n of names) {
          expect(familyOf(n, families), `${p.title}: ${n} is not exported by spcd`).toBeDefined();
          used.add(familyOf(n, families)!);
        }
      }
    }
    // the alerting families are on the dashboard too
    for (const f of [
      'spcd_upgrades_total',
      'spcd_vm_safety_refusals_total',
      'spcd_health_check_failures_total',
      'spcd_quarantined_containers',
      'spcd_engine_available',
    ])
      expect(used.has(f), f).toBe(true);
  });

  it('the alert rules name only families spcd exports (and Prometheus up)', () => {
    const doc = yaml.load(readFileSync(join(REPO, 'deploy/prometheus/spcd-alerts.yaml'), 'utf8')) as {
      groups: { rules: { alert: string; expr: string }[] }[];
    };
    const rules = doc.groups.flatMap((g) => g.rules);
    expect(rules.map((r) => r.alert)).toEqual(
      expect.arrayContaining([
        'SpcdContainerCrashLooping',
        'SpcdUpgradeFailed',
        'SpcdEngineUnavailable',
        'SpcdContainerUnhealthy',
        'SpcdVmSafetyRefused',
        'SpcdContainerQuarantined',
      ]),
    );
    for (const r of rules)
      for (const n of metricNames(r.expr))
        if (n !== 'up')
          expect(familyOf(n, families), `${r.alert}: ${n} is not exported by spcd`).toBeDefined();
  });

  it('docs/reference/metrics.md documents every family, with its type, and no family spcd does not export', () => {
    const doc = readFileSync(join(REPO, 'docs/reference/metrics.md'), 'utf8');
    for (const [name, type] of families)
      expect(doc, name).toMatch(new RegExp(`\\| \`${name}\` \\| ${type} \\|`));
    for (const m of doc.matchAll(/`((?:spcd|process|nodejs)_[a-z_]+)`/g))
      expect(familyOf(m[1]!, families), `docs/reference/metrics.md names ${m[1]}`).toBeDefined();
  });
});
