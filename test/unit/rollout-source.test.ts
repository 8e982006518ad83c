import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEtcdDesired } from '../../agent/etcd/desired.js';
import { isSpcdError } from '../../agent/errors.js';
import { KubeClient } from '../../agent/kube/client.js';
import { parseDesired } from '../../agent/kube/desired-watcher.js';
import { KubeRolloutBackend } from '../../agent/kube/rollout-backend.js';
import { createLogger, silentLogger } from '../../agent/log.js';
import type { DesiredDocument } from '../../agent/rollout/backend.js';
import { fleetView } from '../../agent/rollout/fleet-view.js';
import { RolloutRunner } from '../../agent/rollout/runner.js';
import { FakeClock } from '../support/fake-clock.js';
import { FakeKubeServer } from '../support/kube-server.js';
import { MemoryCluster } from '../support/memory-rollout-backend.js';
import { waitFor } from '../support/wait.js';

/**
 * An invalid rollout object is named by where it came from: the ConfigMap
 * (namespace/name, key "rollout") or the etcd key (field rollout), in the
 * node's log (the runner) and in `spcctl fleet status` (fleetView).
 */
const BAD = 'canary: { nodes: 0 }\n';
const WHAT = 'rollout.canary.nodes must be a whole number >= 1, got 0';

/** What a runner logs when it is given `doc` (its warnings, as JSON records). */
function runnerWarnings(doc: DesiredDocument): { code?: string; err?: string; msg?: string }[] {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  const cluster = new MemoryCluster();
  const runner = new RolloutRunner({
    node: 'compute-0',
    backend: cluster.backend('compute-0'),
    actions: {
      pending: () => true,
      prePull: async () => undefined,
      apply: async () => undefined,
      health: () => 'healthy',
    },
    clock: new FakeClock(),
    log: createLogger({ level: 'warn', destination, env: { SPCD_LOG_FORMAT: 'json' } }),
    defaultMaxConcurrent: 1,
  });
  runner.onDesired(doc);
  return lines
    .join('')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { err?: string });
}

function refusal(f: () => unknown): { message: string; details: Record<string, unknown> } {
  try {
    f();
  } catch (err) {
    if (isSpcdError(err, 'SPEC_INVALID')) return { message: err.message, details: err.details };
    throw err;
  }
  throw new Error('expected SPEC_INVALID');
}

const view = (desired: Parameters<typeof fleetView>[0]['desired']) =>
  fleetView({ desired, ledger: undefined, phases: [], slots: [] }, 0);

describe('the rollout object names its source', () => {
  const server = new FakeKubeServer();
  beforeAll(() => server.start());
  afterAll(() => server.stop());

  it('from the ConfigMap: the Kubernetes backend delivers `ConfigMap <ns>/<name> key "rollout"`', async () => {
    const api = new KubeClient(server.kubeConfig('rollout-src').kc, { callTimeoutMs: 5000 });
    const backend = new KubeRolloutBackend({
      api,
      namespace: 'rollout-src',
      node: 'compute-0',
      configMap: 'spcd-desired',
      leaseDurationSeconds: 5,
      clock: new FakeClock(),
      log: silentLogger(),
    });
    let got: DesiredDocument | undefined;
    const follow = await backend.followDesired(
      (d) => (got = d),
      () => undefined,
    );
    try {
      server.put('configmaps', 'rollout-src', {
        metadata: { name: 'spcd-desired' },
        data: { images: 'nova_compute: nova:30\n', rollout: BAD },
      });
      const doc = await waitFor('the desired document delivered', () => got, { timeoutMs: 30_000 });
      const source = 'ConfigMap rollout-src/spcd-desired key "rollout"';
      expect(doc.source).toBe(source);
      const warned = runnerWarnings(doc);
      expect(warned).toHaveLength(1);
      expect(warned[0]!.err).toBe(`${source}: ${WHAT}`);
      expect(warned[0]!.code).toBe('SPEC_INVALID');
    } finally {
      follow.stop();
      api.close();
    }
  });

  it('from the ConfigMap, in spcctl fleet status', () => {
    const d = parseDesired({
      metadata: { name: 'spcd-desired', namespace: 'spcd-system', resourceVersion: '7' },
      data: { rollout: BAD },
    });
    const r = refusal(() => view(d));
    expect(r.message).toBe(`ConfigMap spcd-system/spcd-desired key "rollout": ${WHAT}`);
    expect(r.details).toMatchObject({ field: 'rollout.canary.nodes', source: d.source });
  });

  it('from etcd: `etcd key <prefix>desired, field rollout`, in the runner and in spcctl fleet status', () => {
    const doc = parseEtcdDesired(
      `images: { nova_compute: "nova:30" }\nrollout: { ${BAD.trim()} }\n`,
      '/spcd/desired',
      '9',
    );
    const source = 'etcd key /spcd/desired, field rollout';
    expect(doc.source).toBe(source);
    const warned = runnerWarnings(doc);
    expect(warned).toHaveLength(1);
    expect(warned[0]!.err).toBe(`${source}: ${WHAT}`);
    expect(warned[0]!.err).not.toContain('ConfigMap');
    const r = refusal(() => view(doc));
    expect(r.message).toBe(`${source}: ${WHAT}`);
    expect(r.details).toMatchObject({ field: 'rollout.canary.nodes', source });
  });
});
