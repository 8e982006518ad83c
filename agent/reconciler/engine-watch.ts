import { SpcdError, toSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { EventBus } from '../model/events.js';
import type { ObservedContainer } from '../model/observed.js';
import type { UnlabeledFact } from '../model/adoption.js';
import type { ContainerEngine, EngineEvent, EventEngine, EventSubscription } from '../engine/types.js';
import type { DesiredContainer } from '../planner/types.js';
import type { StateStore } from '../state/store.js';
import { AdoptionWatch } from './adoption-watch.js';

export const ENGINE_RETRY_MS = 1_000;

export interface EngineWatchDeps {
  readonly engine: Pick<ContainerEngine, 'ping' | 'listManaged' | 'inspectUnlabeled'> & EventEngine;
  readonly exec: { readonly state: Pick<StateStore, 'record'> };
  /** The desired containers: a name none of the listed holds is looked up for an unlabeled container. */
  readonly desired: () => readonly DesiredContainer[];
  readonly events: EventBus;
  readonly log: Logger;
  readonly clock: Clock;
  readonly instance: string;
  /** Something may have changed: the owner asks for a pass. */
  readonly onChange: () => void;
  /** Events count only while the owner runs (not while it starts or stops). */
  readonly running: () => boolean;
  /** The owner is stopping: a wait for the engine gives up. */
  readonly stopping: () => boolean;
}

/**
 * The engine as the reconciler sees it: whether it answers (published on
 * change), its event stream (only ever a hint to re-list; a lost stream is
 * re-subscribed, never read as an exit), and the numbered listings of this
 * instance's containers.
 */
export class EngineWatch {
  private available = false;
  private reason = 'not yet contacted';
  private subscription: EventSubscription | undefined;
  private listings = 0;
  private readonly adoption: AdoptionWatch;

  constructor(private readonly deps: EngineWatchDeps) {
    this.adoption = new AdoptionWatch({ ...deps, state: deps.exec.state });
  }

  /** The containers without spcd labels under desired names, as the latest listing found them. */
  unlabeled(): ReadonlyMap<string, UnlabeledFact> {
    return this.adoption.unlabeled();
  }

  status(): { available: boolean; reason?: string } {
    return this.available ? { available: true } : { available: false, reason: this.reason };
  }

  /** The number of the latest listing begun (0 before the first). */
  listing(): number {
    return this.listings;
  }

  /** Pings until the engine answers; SHUTTING_DOWN when the owner stops meanwhile. */
  async waitAvailable(): Promise<void> {
    for (;;) {
      try {
        await this.deps.engine.ping();
        this.set(true);
        return;
      } catch (err) {
        this.set(false, toSpcdError(err).message);
        if (this.deps.stopping())
          throw new SpcdError('SHUTTING_DOWN', 'stopped while waiting for the engine');
        await new Promise<void>((r) => this.deps.clock.setTimer(ENGINE_RETRY_MS, r));
      }
    }
  }

  /**
   * Lists this instance's containers (a new listing number first); undefined
   * when the engine does not answer, which marks it unavailable.
   */
  async list(): Promise<ObservedContainer[] | undefined> {
    this.listings += 1;
    try {
      const observed = await this.deps.engine.listManaged(this.deps.instance);
      await this.adoption.observe(observed, this.deps.desired());
      this.set(true);
      if (!this.subscription) this.subscribe();
      return observed;
    } catch (err) {
      this.set(false, toSpcdError(err).message);
      return undefined;
    }
  }

  subscribe(): void {
    this.subscription?.close();
    this.subscription = this.deps.engine.subscribe(this.deps.instance, (e) => this.onEvent(e));
  }

  close(): void {
    this.subscription?.close();
    this.subscription = undefined;
  }

  private set(available: boolean, reason = ''): void {
    if (available === this.available && (available || reason === this.reason)) return;
    const changed = available !== this.available;
    this.available = available;
    this.reason = reason;
    if (!changed) return;
    this.deps.log[available ? 'info' : 'warn'](
      { reason },
      available ? 'engine available' : 'engine unavailable',
    );
    this.deps.events.publish({
      type: 'engine',
      at: this.deps.clock.now(),
      available,
      ...(reason ? { reason } : {}),
    });
  }

  private onEvent(e: EngineEvent): void {
    if (!this.deps.running()) return;
    if (e.kind === 'stream-lost') {
      // Never read as "exited": re-subscribe, and re-list to learn what really happened.
      this.deps.log.info({ err: e.error?.message }, 'engine event stream lost; re-listing');
      this.subscription = undefined;
      this.deps.clock.setTimer(ENGINE_RETRY_MS, () => {
        if (this.deps.running() && !this.subscription) this.subscribe();
      });
      this.deps.onChange();
      return;
    }
    if (e.action === 'health_status') return;
    this.deps.onChange();
  }
}
