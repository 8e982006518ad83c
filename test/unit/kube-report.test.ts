import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KUBE_CALLS } from '../../agent/kube/calls.js';
import { KubeClient } from '../../agent/kube/client.js';
import { DesiredWatcher, type DesiredFromConfigMap } from '../../agent/kube/desired-watcher.js';
import { EventRecorder, kubeEventFor } from '../../agent/kube/event-recorder.js';
import {
  CONDITION_TYPE,
  NodeReporter,
  SETS_ANNOTATION,
  reportFromSets,
  type NodeReport,
} from '../../agent/kube/node-reporter.js';
import { silentLogger } from '../../agent/log.js';
import type { SetStatus } from '../../agent/api/types.js';
import { FakeClock } from '../support/fake-clock.js';
import { until } from '../support/fake-reconciler.js';
import { FakeKubeServer } from '../support/kube-server.js';
import { waitFor } from '../support/wait.js';

const NS = 'spcd-system';
const log = silentLogger();

const healthy: NodeReport = {
  engineAvailable: true,
  sets: [
    {
      name: 'nova/compute',
      health: 'healthy',
      generations: { nova_compute: 3, nova_libvirt: 2 },
      unhealthy: [],
    },
  ],
};
const sick: NodeReport = {
  engineAvailable: true,
  sets: [
    {
      name: 'nova/compute',
      health: 'unhealthy',
      generations: { nova_compute: 4, nova_libvirt: 2 },
      unhealthy: ['nova_compute'],
    },
  ],
};

describe('kube reporting through the real client-node', () => {
  const server = new FakeKubeServer();
  let api: KubeClient;

  beforeAll(async () => {
    await server.start();
    api = new KubeClient(server.kubeConfig(NS).kc, { callTimeoutMs: 2000 });
    server.put('nodes', null, {
      metadata: { name: 'compute-1', annotations: { 'other.io/keep': 'yes' } },
      status: {
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'kubelet is posting ready status',
          },
        ],
      },
    });
  });
  afterAll(() => server.stop());

  it('NodeReporter: annotation + condition, kubelet condition kept, throttled, only on change', async () => {
    const clock = new FakeClock();
    const r = new NodeReporter({ api, nodeName: 'compute-1', clock, log }, { minIntervalMs: 10_000 });
    r.report(healthy);
    await r.flush();
    let node = server.get('nodes', null, 'compute-1')!;
    const ann = node.metadata.annotations as Record<string, string>;
    expect(ann['other.io/keep']).toBe('yes');
    expect(JSON.parse(ann[SETS_ANNOTATION]!)).toEqual({
      'nova/compute': { health: 'healthy', generations: { nova_compute: 3, nova_libvirt: 2 } },
    });
    const conds = (node.status as { conditions: { type: string; status: string; reason: string }[] })
      .conditions;
    expect(conds.map((c) => c.type).sort()).toEqual(['Ready', CONDITION_TYPE]);
    expect(conds.find((c) => c.type === CONDITION_TYPE)).toMatchObject({
      status: 'True',
      reason: 'AllSetsHealthy',
    });
    const patchCalls = () =>
      server.calls.filter((c) => c.verb === 'patch' && c.resource.startsWith('nodes')).length;
    expect(patchCalls()).toBe(2);
    // the patches used the right content types
    const types = server.calls.filter((c) => c.verb === 'patch').map((c) => `${c.resource} ${c.contentType}`);
    expect(types).toEqual([
      'nodes application/merge-patch+json',
      'nodes/status application/strategic-merge-patch+json',
    ]);

    // unchanged: nothing sent
    r.report(healthy);
    await r.flush();
    expect(patchCalls()).toBe(2);

    // changed within the throttle window: held back until the window passes
    r.report(sick);
    await r.flush();
    expect(patchCalls()).toBe(2);
    clock.advance(10_000);
    await waitFor('the held-back report sent', () => patchCalls() === 4);
    await r.flush();
    node = server.get('nodes', null, 'compute-1')!;
    const c2 = (node.status as { conditions: { type: string; status: string; message: string }[] })
      .conditions;
    expect(c2.find((c) => c.type === CONDITION_TYPE)).toMatchObject({
      status: 'False',
      message: 'nova/compute: nova_compute',
    });
    expect(c2.find((c) => c.type === 'Ready')?.status).toBe('True');
    r.stop();
  });

  it('reportFromSets flattens the status tree; an operator stop is not ill health', () => {
    const c = (name: string, state: string, health: string, generation: number) =>
      ({
        name,
        set: 'nova/compute',
        generation,
        state,
        health,
      }) as unknown as SetStatus['containers'][number];
    const tree = [
      {
        name: 'nova',
        path: 'nova',
        description: '',
        containers: [],
        sets: [
          {
            name: 'compute',
            path: 'nova/compute',
            description: '',
            containers: [c('nova_compute', 'running', 'healthy', 2), c('nova_ssh', 'stopped', 'none', 1)],
            sets: [],
          },
        ],
      },
    ] as unknown as SetStatus[];
    expect(reportFromSets(tree)).toEqual({
      engineAvailable: true,
      sets: [
        {
          name: 'nova/compute',
          health: 'healthy',
          generations: { nova_compute: 2, nova_ssh: 1 },
          unhealthy: [],
        },
      ],
    });
  });

  it('EventRecorder: Events on the Node, identical ones aggregated (count++), storms rate-limited', async () => {
    const clock = new FakeClock();
    const rec = new EventRecorder(
      { api, nodeName: 'compute-1', namespace: NS, clock, log },
      { burst: 3, refillMs: 10_000 },
    );
    await rec.record({
      type: 'Warning',
      reason: 'UpgradeFailed',
      message: 'nova_compute: health gate failed (rolled back)',
    });
    clock.advance(1000);
    await rec.record({
      type: 'Warning',
      reason: 'UpgradeFailed',
      message: 'nova_compute: health gate failed (rolled back)',
    });
    await rec.record({ type: 'Normal', reason: 'UpgradeSucceeded', message: 'upgraded nova_compute' });
    let events = server.list('events', NS);
    expect(events).toHaveLength(2);
    const failed = events.find((e) => e.reason === 'UpgradeFailed')!;
    expect(failed).toMatchObject({
      type: 'Warning',
      count: 2,
      involvedObject: { kind: 'Node', name: 'compute-1' },
      source: { component: 'spcd', host: 'compute-1' },
    });
    // the bucket (burst 3) is empty now: the fourth write is dropped and counted
    await rec.record({ type: 'Normal', reason: 'RolledBack', message: 'rolled back nova_compute' });
    expect(rec.dropped).toBe(1);
    events = server.list('events', NS);
    expect(events).toHaveLength(2);
    clock.advance(10_000);
    await rec.record({ type: 'Normal', reason: 'RolledBack', message: 'rolled back nova_compute' });
    expect(server.list('events', NS)).toHaveLength(3);
  });

  it('kubeEventFor maps bus events to reasons', () => {
    expect(
      kubeEventFor({
        type: 'operation',
        at: 0,
        operationId: 'op1',
        kind: 'upgrade',
        target: 'nova_libvirt',
        phase: 'failed',
        error: { code: 'VM_SAFETY_REFUSED', message: '3 VMs running' },
      }),
    ).toEqual({ type: 'Warning', reason: 'Refused', message: 'nova_libvirt: 3 VMs running' });
    expect(kubeEventFor({ type: 'health', at: 0, container: 'x', status: 'healthy' })).toBeUndefined();
    const dep = {
      type: 'dependency',
      at: 0,
      container: 'nova_compute',
      check: 'amqp',
      dependency: 'rabbitmq',
    } as const;
    expect(kubeEventFor({ ...dep, status: 'down', output: 'refused' })).toEqual({
      type: 'Warning',
      reason: 'DependencyDown',
      message: 'nova_compute: rabbitmq down (check amqp; not restarted for it)',
    });
    expect(kubeEventFor({ ...dep, status: 'up' })).toMatchObject({ type: 'Normal', reason: 'DependencyUp' });
  });

  it('DesiredWatcher: list, watch, re-list after 410 Gone, absent and invalid ConfigMaps', async () => {
    const clock = new FakeClock();
    const seen: (DesiredFromConfigMap | undefined)[] = [];
    const invalid: string[] = [];
    const w = new DesiredWatcher(
      { api, namespace: NS, clock, log },
      {
        configMapName: 'spcd-desired',
        onChange: (d) => seen.push(d),
        onInvalid: (e) => invalid.push(e.code),
        retryMs: 50,
      },
    );
    await w.start();
    expect(seen).toEqual([undefined]); // absent: the host's files rule
    server.put('configmaps', NS, {
      metadata: { name: 'spcd-desired' },
      data: {
        images: 'nova_compute: registry.local/kolla/nova-compute:2024.2-2\n',
        globals: 'openstack_release: "2024.2"\n',
      },
    });
    await until(clock, 'the ConfigMap seen', () => seen.length === 2);
    expect(seen[1]).toMatchObject({
      images: { nova_compute: 'registry.local/kolla/nova-compute:2024.2-2' },
      globals: { openstack_release: '2024.2' },
    });

    // Expire the watch history, then drop the stream: the re-watch gets 410 and the watcher re-lists.
    server.put('configmaps', NS, { metadata: { name: 'unrelated' }, data: {} });
    server.compact();
    const listsBefore = w.lists;
    server.closeWatches();
    await until(
      clock,
      're-listed and watching',
      () => w.lists === listsBefore + 1 && w.status === 'watching',
    );
    server.put('configmaps', NS, {
      metadata: { name: 'spcd-desired' },
      data: { images: 'nova_compute: registry.local/kolla/nova-compute:2024.2-3\n' },
    });
    await until(clock, 'the new ConfigMap seen', () => seen.length === 3);
    expect(seen[2]?.images).toEqual({ nova_compute: 'registry.local/kolla/nova-compute:2024.2-3' });

    server.put('configmaps', NS, {
      metadata: { name: 'spcd-desired' },
      data: { images: '- not\n- a map\n' },
    });
    await until(clock, 'the invalid ConfigMap refused', () => invalid.length === 1);
    expect(invalid).toEqual(['SPEC_INVALID']);
    expect(seen).toHaveLength(3);
    w.stop();
  });

  it('every request the code sent is a row of KUBE_CALLS (what RBAC grants)', () => {
    const table = new Set(Object.values(KUBE_CALLS).map((c) => `${c.group} ${c.resource} ${c.verb}`));
    const sent = new Set(server.calls.map((c) => `${c.group} ${c.resource} ${c.verb}`));
    expect(sent.size).toBeGreaterThan(5);
    for (const s of sent) expect(table.has(s), s).toBe(true);
  });
});
