import yaml from 'js-yaml';
import {
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1ConfigMap,
  V1DaemonSet,
  V1Namespace,
  V1Role,
  V1RoleBinding,
  V1ServiceAccount,
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
  dumpYaml,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { KUBE_CALLS } from '../../agent/kube/calls.js';
import { manifestsOfKind as find, rawManifests, typedManifests } from '../support/kube-manifests.js';

const raw = rawManifests();
const typed = typedManifests();

describe('deploy/kubernetes manifests', () => {
  it('every document deserializes into its client-node type', () => {
    const classes: Record<string, unknown> = {
      Namespace: V1Namespace,
      ServiceAccount: V1ServiceAccount,
      ClusterRole: V1ClusterRole,
      ClusterRoleBinding: V1ClusterRoleBinding,
      Role: V1Role,
      RoleBinding: V1RoleBinding,
      ConfigMap: V1ConfigMap,
      DaemonSet: V1DaemonSet,
      ValidatingAdmissionPolicy: V1ValidatingAdmissionPolicy,
      ValidatingAdmissionPolicyBinding: V1ValidatingAdmissionPolicyBinding,
    };
    expect(typed.length).toBe(raw.length);
    for (const o of typed) {
      const cls = classes[o.kind!] as new () => unknown;
      expect(cls, `unexpected kind ${o.kind}`).toBeDefined();
      expect(o).toBeInstanceOf(cls);
      expect(o.metadata?.name).toBeTruthy();
    }
  });

  it('no field is unknown to the Kubernetes types (a round trip through the serializer loses nothing)', () => {
    for (let i = 0; i < typed.length; i++) {
      const back = yaml.load(dumpYaml(typed[i]!));
      expect(back, `${raw[i]!.kind} ${(raw[i]!.metadata as { name: string }).name}`).toEqual(raw[i]);
    }
  });

  it('the DaemonSet has what a compute host needs', () => {
    const [ds] = find<V1DaemonSet>('DaemonSet');
    const pod = ds!.spec!.template.spec!;
    expect(ds!.spec!.selector.matchLabels).toEqual(ds!.spec!.template.metadata!.labels);
    expect(ds!.spec!.updateStrategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxUnavailable: 1, maxSurge: 0 },
    });
    expect(pod.nodeSelector).toEqual({ 'openstack-compute-node': 'enabled' });
    expect(pod.hostNetwork).toBe(true);
    expect(pod.hostPID).toBe(true);
    expect(pod.serviceAccountName).toBe('spcd');
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(60);
    const c = pod.containers[0]!;
    expect(c.securityContext?.privileged).toBe(true);
    expect(c.livenessProbe).toBeUndefined();
    expect(c.env?.find((e) => e.name === 'NODE_NAME')?.valueFrom?.fieldRef?.fieldPath).toBe('spec.nodeName');
    const hostPaths = Object.fromEntries(
      (pod.volumes ?? []).filter((v) => v.hostPath).map((v) => [v.name, v.hostPath!.path]),
    );
    expect(Object.values(hostPaths).sort()).toEqual([
      '/etc/spcd',
      '/run/spcd',
      '/run/spcd-ro',
      '/var/lib/spcd',
      '/var/run/docker.sock',
    ]);
    // host paths are mounted at the same paths inside the pod
    for (const m of c.volumeMounts ?? []) if (hostPaths[m.name]) expect(m.mountPath).toBe(hostPaths[m.name]);
    expect(c.command).toEqual(expect.arrayContaining(['--sets', '--overrides', '--state-dir', '--socket']));
  });

  it('RBAC grants exactly the calls agent/kube/calls.ts lists', () => {
    const expand = (scope: string, rules: V1PolicyRule[] | undefined) =>
      (rules ?? []).flatMap((r) =>
        (r.apiGroups ?? []).flatMap((g) =>
          (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${scope} ${g || 'core'} ${res} ${v}`)),
        ),
      );
    const granted = [
      ...find<V1ClusterRole>('ClusterRole').flatMap((r) => expand('cluster', r.rules)),
      ...find<V1Role>('Role').flatMap((r) => expand('namespace', r.rules)),
    ].sort();
    const called = Object.values(KUBE_CALLS)
      .map((c) => `${c.scope} ${c.group || 'core'} ${c.resource} ${c.verb}`)
      .sort();
    expect(granted).toEqual([...new Set(called)].sort());
    expect(granted.some((g) => g.includes('*'))).toBe(false);
  });

  it('bindings tie the ServiceAccount to the roles, in the namespace the Role lives in', () => {
    const [sa] = find<V1ServiceAccount>('ServiceAccount');
    const [role] = find<V1Role>('Role');
    const [crole] = find<V1ClusterRole>('ClusterRole');
    const [rb] = find<V1RoleBinding>('RoleBinding');
    const [crb] = find<V1ClusterRoleBinding>('ClusterRoleBinding');
    const subject = { kind: 'ServiceAccount', name: sa!.metadata!.name, namespace: sa!.metadata!.namespace };
    expect(rb!.subjects).toEqual([subject]);
    expect(crb!.subjects).toEqual([subject]);
    expect(rb!.roleRef).toMatchObject({ kind: 'Role', name: role!.metadata!.name });
    expect(crb!.roleRef).toMatchObject({ kind: 'ClusterRole', name: crole!.metadata!.name });
    expect(role!.metadata!.namespace).toBe(sa!.metadata!.namespace);
    expect(rb!.metadata!.namespace).toBe(sa!.metadata!.namespace);
  });
});
