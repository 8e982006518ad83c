/**
 * The rollout's backend over Kubernetes (agent/rollout/backend.ts):
 * - the desired document: the `spcd-desired` ConfigMap (DesiredWatcher);
 * - the ledger: the Lease `spcd-rollout`, its annotation written only by
 *   update with the resourceVersion read (409 = someone wrote first);
 * - each node's phase: its own Lease `spcd-node-<node>` (label
 *   spcd.openstack.org/rollout-node=true), written only by that node;
 * - slots: the N slot Leases (FleetSlots, runFleetUpgrade).
 * Leases only: the Role already grants them, and they are small to list.
 */
import { V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import { SpcdError, isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { DesiredDocument, RolloutBackend } from '../rollout/backend.js';
import type { Ledger, PhaseReport } from '../rollout/decide.js';
import type { KubeApi } from './client.js';
import { DesiredWatcher } from './desired-watcher.js';
import { FleetSlots } from './fleet-slots.js';
import { runFleetUpgrade } from './fleet-upgrade.js';
import { ledgerFromJson, phaseFromJson } from '../rollout/records.js';

export const LEDGER_LEASE = 'spcd-rollout';
export const LEDGER_ANNOTATION = 'spcd.openstack.org/rollout-ledger';
export const PHASE_LABEL = 'spcd.openstack.org/rollout-node';
export const PHASE_ANNOTATION = 'spcd.openstack.org/rollout-phase';

export function phaseLeaseName(node: string): string {
  return `spcd-node-${node}`;
}

export interface KubeRolloutBackendDeps {
  readonly api: KubeApi;
  readonly namespace: string;
  readonly node: string;
  /** The desired ConfigMap's name. */
  readonly configMap: string;
  readonly leaseDurationSeconds: number;
  readonly clock: Clock;
  readonly log: Logger;
  /** Spread of the first slot pass (1 s in the daemon). */
  readonly startJitterMs?: number;
  readonly random?: () => number;
}

/** The ledger an annotation holds; undefined when absent or not a ledger. */
export function ledgerFrom(lease: V1Lease | undefined): Ledger | undefined {
  return ledgerFromJson(lease?.metadata?.annotations?.[LEDGER_ANNOTATION]);
}

/** A node's report from its phase Lease; undefined when absent or unreadable. */
export function phaseFrom(lease: V1Lease | undefined): PhaseReport | undefined {
  return phaseFromJson(lease?.metadata?.annotations?.[PHASE_ANNOTATION]);
}

/**
 * The reports that count toward the fleet size: one per phase Lease that is
 * consistent with its own node (its name is that node's phase Lease name,
 * and its holderIdentity and its report name the same node). Over etcd a
 * report counts only under its own node's key; here the Lease name is the
 * key. A slot Lease labelled as a phase, or a node's Lease speaking for
 * another node, counts for nobody; the admission policy spcd-own-leases
 * (deploy/kubernetes/) lets a node write no phase Lease but its own.
 */
export function fleetPhases(leases: readonly V1Lease[]): PhaseReport[] {
  return leases.flatMap((l) => {
    const p = phaseFrom(l);
    const own = p && l.metadata?.name === phaseLeaseName(p.node) && l.spec?.holderIdentity === p.node;
    return own ? [p] : [];
  });
}

export class KubeRolloutBackend implements RolloutBackend {
  private readonly slots = new Map<number, FleetSlots>();
  private myPhase: V1Lease | undefined;

  constructor(private readonly d: KubeRolloutBackendDeps) {}

  async followDesired(
    onChange: (doc: DesiredDocument | undefined) => void,
    onInvalid: (err: SpcdError) => void,
  ): Promise<{ stop(): void }> {
    const { api, namespace, clock, log } = this.d;
    const watcher = new DesiredWatcher(
      { api, namespace, clock, log },
      {
        configMapName: this.d.configMap,
        onChange: (cm) =>
          onChange(
            cm && {
              version: cm.resourceVersion,
              images: cm.images,
              globals: cm.globals,
              rollout: cm.rollout,
              source: cm.source,
            },
          ),
        onInvalid,
      },
    );
    await watcher.start();
    return { stop: () => watcher.stop() };
  }

  private async readOrNone(name: string): Promise<V1Lease | undefined> {
    try {
      return await this.d.api.readLease(this.d.namespace, name);
    } catch (err) {
      if (isSpcdError(err, 'NOT_FOUND')) return undefined;
      throw err;
    }
  }

  async readLedger(): Promise<{ ledger: Ledger | undefined; version: string | undefined }> {
    const lease = await this.readOrNone(LEDGER_LEASE);
    const ledger = ledgerFrom(lease);
    // A ledger Lease that is there but holds no ledger is not "nothing written": a forged or
    // broken one must not reset the canaries and the failures it should hold.
    if (lease && !ledger)
      throw new SpcdError(
        'FLEET_RECORD_INVALID',
        `Lease ${this.d.namespace}/${LEDGER_LEASE} holds no rollout ledger spcd wrote (annotation ${LEDGER_ANNOTATION}); no node goes on until it is fixed or deleted`,
        {
          lease: LEDGER_LEASE,
          namespace: this.d.namespace,
          resourceVersion: lease.metadata?.resourceVersion,
        },
      );
    return { ledger, version: lease?.metadata?.resourceVersion };
  }

  async writeLedger(ledger: Ledger, version: string | undefined): Promise<boolean> {
    const { api, namespace } = this.d;
    const body: V1Lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: LEDGER_LEASE,
        namespace,
        annotations: { [LEDGER_ANNOTATION]: JSON.stringify(ledger) },
        ...(version ? { resourceVersion: version } : {}),
      },
      spec: {},
    };
    try {
      if (version === undefined) await api.createLease(namespace, body);
      else await api.replaceLease(namespace, LEDGER_LEASE, body);
      return true;
    } catch (err) {
      if (isSpcdError(err, 'LEASE_CONFLICT')) return false;
      throw err;
    }
  }

  async readPhase(): Promise<PhaseReport | undefined> {
    this.myPhase = await this.readOrNone(phaseLeaseName(this.d.node));
    return phaseFrom(this.myPhase);
  }

  async writePhase(report: PhaseReport): Promise<void> {
    const { api, namespace, node, clock } = this.d;
    const name = phaseLeaseName(node);
    for (let attempt = 0; attempt < 3; attempt++) {
      const rv = this.myPhase?.metadata?.resourceVersion;
      const body: V1Lease = {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: {
          name,
          namespace,
          labels: { [PHASE_LABEL]: 'true' },
          annotations: { [PHASE_ANNOTATION]: JSON.stringify(report) },
          ...(rv ? { resourceVersion: rv } : {}),
        },
        spec: { holderIdentity: node, renewTime: new V1MicroTime(clock.now()) },
      };
      try {
        this.myPhase = rv
          ? await api.replaceLease(namespace, name, body)
          : await api.createLease(namespace, body);
        return;
      } catch (err) {
        // Only this node writes it: a conflict or absence means our copy is stale (a restart, a deletion).
        if (!isSpcdError(err, 'LEASE_CONFLICT') && !isSpcdError(err, 'NOT_FOUND')) throw err;
        this.myPhase = await this.readOrNone(name);
      }
    }
  }

  async listPhases(): Promise<PhaseReport[]> {
    const list = await this.d.api.listLeases(this.d.namespace, `${PHASE_LABEL}=true`);
    return fleetPhases(list.items);
  }

  withSlot<T>(maxConcurrent: number, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    const { api, namespace, node, clock, log } = this.d;
    let slots = this.slots.get(maxConcurrent);
    if (!slots) {
      slots = new FleetSlots(
        { api, namespace, holder: node, clock, log, ...(this.d.random ? { random: this.d.random } : {}) },
        { slots: maxConcurrent, leaseDurationSeconds: this.d.leaseDurationSeconds },
      );
      this.slots.set(maxConcurrent, slots);
    }
    return runFleetUpgrade(slots, fn, {
      clock,
      log,
      signal,
      startJitterMs: this.d.startJitterMs ?? 0,
      ...(this.d.random ? { random: this.d.random } : {}),
    });
  }
}
