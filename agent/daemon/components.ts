/**
 * spcd's start-up, in order (daemon/lifecycle.ts runs it): each component's
 * start opens one thing, its stop closes it; a failure or a signal part way
 * closes what was opened, newest first. main.ts puts the state directory's
 * lock before these.
 */
import { allContainers } from '../model/spec.js';
import type { Definitions } from '../config/definitions.js';
import type { Journal } from '../state/journal.js';
import type { Converge } from './converge.js';
import type { DaemonParts } from './daemon.js';
import type { Component } from './lifecycle.js';
import { serveApi } from './serve-api.js';

export interface StartupDeps {
  readonly parts: DaemonParts;
  readonly journal: Journal;
  readonly definitions: Definitions;
  readonly converge: Converge;
  readonly version: string;
}

const nothing = (): Promise<void> => Promise.resolve();

export function startupComponents(d: StartupDeps): Component[] {
  const { parts, journal, definitions } = d;
  const { settings, log, clock, state, health } = parts;
  let api: { close(): Promise<void> } | undefined;
  return [
    {
      name: 'state',
      start: async () => {
        const lost = await state.load(new Date(clock.now()));
        if (lost) log.error({ ...lost }, 'state.json unusable: set aside, rebuilding from container labels');
      },
      stop: nothing,
    },
    { name: 'journal', start: () => journal.init(), stop: nothing },
    // Kills the execs of checks in flight and waits for them.
    { name: 'health', start: nothing, stop: () => health.close() },
    {
      name: 'definitions',
      start: async () => {
        await definitions.open();
        if (!definitions.error)
          log.info(
            {
              instance: settings.instance,
              containers: allContainers(definitions.current.sets).length,
              version: d.version,
            },
            'definitions loaded',
          );
      },
      // A reload retry still waiting runs no more.
      stop: async () => definitions.close(),
    },
    {
      name: 'api',
      start: async () => {
        api = await serveApi(parts);
      },
      stop: async () => api?.close(),
    },
    // Preflight, then adopt, recover, converge; its stop stops the loop (in-flight operations
    // finish, containers keep running).
    d.converge,
    // Kubernetes and etcd pace fleet upgrades and report; the containers depend on neither.
    // Each is loaded only when enabled (the Kubernetes client alone costs ~75 MB of RSS).
    optionalIntegration('kube', 'kubernetes', log, async () => {
      if (!settings.kube || !settings.nodeName) return undefined;
      const { startKubeIntegration } = await import('./kube-wiring.js');
      return startKubeIntegration(parts, settings.kube, settings.nodeName);
    }),
    optionalIntegration('etcd', 'etcd', log, async () => {
      if (!settings.etcd || !settings.nodeName) return undefined;
      const { startEtcdIntegration } = await import('./etcd-wiring.js');
      return startEtcdIntegration(parts, settings.etcd, settings.nodeName);
    }),
  ];
}

/** A fleet integration: started when configured; one that fails to start is logged, never fatal. */
function optionalIntegration(
  name: string,
  what: string,
  log: DaemonParts['log'],
  open: () => Promise<{ stop(): Promise<void> } | undefined>,
): Component {
  let opened: { stop(): Promise<void> } | undefined;
  return {
    name,
    start: async () => {
      try {
        opened = await open();
      } catch (err) {
        log.error(
          { err: (err as Error).message, code: (err as { code?: unknown }).code ?? null },
          `${what} integration did not start; continuing without it`,
        );
      }
    },
    stop: async () => opened?.stop(),
  };
}
