/**
 * The changes the OpenStack end-to-end test makes through spcd's API
 * (test/integration/openstack-e2e.test.ts): an upgrade, a restart, and an
 * upgrade during which spcd is killed with SIGKILL (its failpoint
 * upgrade.after-stop-old) and started again, which must put the previous
 * generation back. Each returns when spcd's operation ended, with spcd's own
 * figures and the time the old container began to stop.
 */
import { expect } from 'vitest';
import type { SpcdProcess } from '../support/daemon.js';
import { inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';
import type { EventTap, SpcdApi } from './libvirt-e2e-harness.js';
import type { Acted } from './openstack-steps.js';

export interface SpcdControl {
  readonly api: () => SpcdApi;
  readonly tap: () => EventTap;
  readonly spcd: () => SpcdProcess;
  /** Starts a fresh spcd (with `env`) and opens a new event tap. */
  readonly startSpcd: (env?: NodeJS.ProcessEnv) => Promise<void>;
  /** The nova_libvirt container's name (its stop opens the libvirt API window). */
  readonly libvirt: () => string;
}

export class SpcdActions {
  constructor(private readonly c: SpcdControl) {}

  /** An upgrade through the API: spcd's figures are stop -> running and stop -> healthy. */
  readonly upgrade = async (container: string, image: string): Promise<Acted> => {
    const before = await this.c.api().container(container);
    const op = await this.c.api().post(`/v1/containers/${container}/upgrade`, {
      image,
      expectedGeneration: before.generation,
    });
    const fin = await this.c.tap().finished(op, 900_000);
    if (fin.phase !== 'succeeded')
      throw new Error(`upgrade of ${container} failed: ${JSON.stringify(fin.error)}`);
    const stop = this.c
      .tap()
      .find(
        (e) =>
          e.type === 'upgrade-step' && e.operationId === op && e.step === 'stop-old' && e.outcome === 'begin',
      );
    if (!stop) throw new Error('no stop-old step event');
    const w = fin.result?.window as { stopToRunningMs: number; stopToHealthyMs: number };
    const after = await this.c.api().container(container);
    expect(after.image).toBe(image);
    expect(after.generation).toBe(before.generation + 1);
    const census = this.c.tap().find((e) => e.type === 'census' && e.operationId === op);
    return {
      stopAt: stop.at,
      libvirtStopped: container === this.c.libvirt(),
      spcd: `${before.image}->${image} stop_to_running_s=${(w.stopToRunningMs / 1000).toFixed(2)} stop_to_healthy_s=${(w.stopToHealthyMs / 1000).toFixed(2)}${census ? ` census=${census.outcome}:${census.detail}` : ''}`,
    };
  };

  readonly restart = async (container: string): Promise<Acted> => {
    const before = await this.c.api().container(container);
    const op = await this.c
      .api()
      .post(`/v1/containers/${container}/restart`, { expectedGeneration: before.generation });
    const fin = await this.c.tap().finished(op, 600_000);
    if (fin.phase !== 'succeeded')
      throw new Error(`restart of ${container} failed: ${JSON.stringify(fin.error)}`);
    const census = this.c.tap().find((e) => e.type === 'census' && e.operationId === op);
    return {
      stopAt: Date.parse(String(fin.result?.stoppedAt)),
      libvirtStopped: container === this.c.libvirt(),
      spcd: `restart stop_to_running_s=${(Number(fin.result?.windowMs) / 1000).toFixed(2)}${census ? ` census=${census.outcome}:${census.detail}` : ''}`,
    };
  };

  /** SIGKILL right after the container's old generation stopped, then a fresh spcd recovers. */
  readonly killMidUpgrade = async (container: string, image: string): Promise<Acted> => {
    const before = await this.c.api().container(container);
    this.c.tap().close();
    await this.c.spcd().stop();
    await this.c.startSpcd({ SPCD_FAILPOINT: 'upgrade.after-stop-old' });
    const op = await this.c.api().post(`/v1/containers/${container}/upgrade`, {
      image,
      expectedGeneration: before.generation,
    });
    if ((await this.c.spcd().exitWithin(600_000)) === 'still running')
      throw new Error('spcd did not reach the failpoint');
    expect(this.c.spcd().child.signalCode).toBe('SIGKILL');
    const stop = this.c
      .tap()
      .find(
        (e) =>
          e.type === 'upgrade-step' && e.operationId === op && e.step === 'stop-old' && e.outcome === 'begin',
      );
    if (!stop) throw new Error('no stop-old event before the crash');
    this.c.tap().close();
    // spcd goes on once a host-network container's process is gone
    // (executor/stop-old.ts), before Docker reports the stop: Docker finishes
    // the stop the killed spcd asked for, a moment later under load.
    await waitFor(
      'Docker to report the old container stopped',
      async () => (await inspect(before.containerId!))?.State.Running === false,
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const tRestart = Date.now();
    await this.c.startSpcd();
    const after = await waitFor(
      'recovery to put the previous generation back',
      async () => {
        const c = await this.c.api().container(container);
        return (
          c.state === 'running' &&
          c.containerId === before.containerId &&
          c.startedAt !== before.startedAt &&
          c
        );
      },
      { timeoutMs: 300_000, intervalMs: 200 },
    );
    expect(after.generation).toBe(before.generation);
    const undone = (await this.c.api().generations(container)).find((g) => g.generation > before.generation);
    expect(undone?.outcome).toBe('rolled-back');
    const startedS = (Date.parse(after.startedAt!) - stop.at) / 1000;
    return {
      stopAt: stop.at,
      libvirtStopped: false,
      spcd: `killed_after_stop_old spcd_restart_after_s=${((tRestart - stop.at) / 1000).toFixed(2)} stop_to_recovered_start_s=${startedS.toFixed(2)} undone=${undone?.outcome}`,
    };
  };
}
