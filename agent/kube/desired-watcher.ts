/**
 * DesiredWatcher: optionally follows one ConfigMap that carries desired images
 * and globals for this fleet. list (to learn a resourceVersion) -> watch from
 * it -> on a normal close re-watch from the last seen version -> on 410 Gone
 * (an ERROR event or a 410 answer) re-list. A ConfigMap that is absent
 * delivers `undefined`: the files on the host stay authoritative.
 *
 * ConfigMap keys: `images` (YAML/JSON map container -> image), `globals`
 * (YAML/JSON map of template globals) and `rollout` (the rollout object,
 * validated by agent/rollout/spec.ts). All optional.
 */
import type { V1ConfigMap } from '@kubernetes/client-node';
import { SpcdError, isSpcdError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../model/clock.js';
import type { KubeApi, WatchHandle } from './client.js';
import { parseImageRef } from '../model/image-ref.js';
import { valuesOf } from '../render/values.js';
import { parseBudgetedYaml, YamlBudget } from '../spec/yaml.js';

export interface DesiredFromConfigMap {
  readonly resourceVersion: string;
  readonly images: Readonly<Record<string, string>>;
  readonly globals: Readonly<Record<string, unknown>>;
  /** The `rollout` key as parsed YAML (validated by the rollout runner); undefined when absent. */
  readonly rollout?: Record<string, unknown>;
  /** Where `rollout` came from, for its errors: `ConfigMap <namespace>/<name> key "rollout"`. */
  readonly source: string;
}

/** The ConfigMap's `rollout` key as the rollout object's errors name it. */
export function configMapSource(cm: V1ConfigMap): string {
  const ns = cm.metadata?.namespace;
  return `ConfigMap ${ns ? `${ns}/` : ''}${cm.metadata?.name ?? ''} key "rollout"`;
}

export interface DesiredWatcherDeps {
  readonly api: KubeApi;
  readonly namespace: string;
  readonly clock: Clock;
  readonly log: Logger;
}

export interface DesiredWatcherOptions {
  readonly configMapName: string;
  /** Called with each new content; undefined when the ConfigMap does not exist. */
  readonly onChange: (desired: DesiredFromConfigMap | undefined) => void;
  /** Called when the content is present but invalid (kept out of onChange). */
  readonly onInvalid?: (err: SpcdError) => void;
  /** Pause before retrying after an error. Default 5 s. */
  readonly retryMs?: number;
  /** Server-side watch timeout. Default 300 s. */
  readonly watchTimeoutSeconds?: number;
}

function parseMap(
  text: string | undefined,
  key: string,
  source: string,
  budget: YamlBudget,
): Record<string, unknown> {
  if (text === undefined || text.trim() === '') return {};
  const v = parseBudgetedYaml(text, `${source} key "${key}"`, budget, { key });
  if (v === null || v === undefined) return {};
  if (typeof v !== 'object' || Array.isArray(v))
    throw new SpcdError('SPEC_INVALID', `ConfigMap key "${key}" must be a map`, { key });
  return v as Record<string, unknown>;
}

/** Parses the ConfigMap's data; throws SPEC_INVALID / SPEC_YAML with the key named. */
export function parseDesired(cm: V1ConfigMap): DesiredFromConfigMap {
  const data = cm.data ?? {};
  let images: Record<string, unknown>;
  let globals: Record<string, unknown>;
  let rollout: Record<string, unknown> | undefined;
  // One budget for the whole document (bytes, nodes, depth), as for one load of the definitions.
  const budget = new YamlBudget();
  const source = `ConfigMap ${cm.metadata?.name ?? ''}`;
  try {
    images = parseMap(data.images, 'images', source, budget);
    if (data.rollout !== undefined && data.rollout.trim() !== '')
      rollout = parseMap(data.rollout, 'rollout', source, budget);
    // globals are template values: the rules of a globals file (no anchors, no __proto__, a mapping)
    const where = `${source} key "globals"`;
    globals = valuesOf(parseBudgetedYaml(data.globals ?? '', where, budget, { key: 'globals' }), where);
  } catch (err) {
    if (err instanceof SpcdError) throw err;
    throw new SpcdError(
      'SPEC_YAML',
      `ConfigMap ${cm.metadata?.name}: ${(err as Error).message}`,
      {},
      { cause: err },
    );
  }
  for (const [k, v] of Object.entries(images)) {
    if (typeof v !== 'string' || v === '')
      throw new SpcdError('SPEC_INVALID', `ConfigMap key "images": ${k} must be an image reference string`, {
        key: 'images',
        container: k,
      });
    // the grammar only: which images a node runs is its own image policy's say (executor/image.ts)
    const ref = parseImageRef(v);
    if ('invalid' in ref)
      throw new SpcdError(
        'SPEC_INVALID',
        `ConfigMap key "images": ${k}: '${v}' is not an image reference: ${ref.invalid}`,
        {
          key: 'images',
          container: k,
        },
      );
  }
  return {
    resourceVersion: cm.metadata?.resourceVersion ?? '',
    images: images as Record<string, string>,
    globals,
    ...(rollout ? { rollout } : {}),
    source: configMapSource(cm),
  };
}

type WatcherState = 'idle' | 'listing' | 'watching' | 'waiting' | 'stopped';

export class DesiredWatcher {
  private state: WatcherState = 'idle';
  private rv = '';
  private lastDelivered: string | undefined = 'never';
  private handle: WatchHandle | undefined;
  private cancelTimer: (() => void) | undefined;
  private readonly retryMs: number;
  /** How many times the watcher listed (first start + every 410 / error). */
  lists = 0;

  constructor(
    private readonly deps: DesiredWatcherDeps,
    private readonly opts: DesiredWatcherOptions,
  ) {
    this.retryMs = opts.retryMs ?? 5000;
  }

  get status(): WatcherState {
    return this.state;
  }

  /** Starts listing and watching; resolves after the first list (or its failure, then retries alone). */
  async start(): Promise<void> {
    if (this.state !== 'idle') return;
    await this.relist();
  }

  stop(): void {
    this.state = 'stopped';
    this.handle?.stop();
    this.handle = undefined;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  private deliver(cm: V1ConfigMap | undefined): void {
    const key = cm ? (cm.metadata?.resourceVersion ?? '') : undefined;
    if (key === this.lastDelivered) return;
    this.lastDelivered = key;
    if (!cm) return this.opts.onChange(undefined);
    try {
      this.opts.onChange(parseDesired(cm));
    } catch (err) {
      const e = isSpcdError(err) ? err : new SpcdError('SPEC_INVALID', String(err));
      this.deps.log.warn(
        { code: e.code, configMap: this.opts.configMapName },
        'desired ConfigMap invalid; ignored',
      );
      this.opts.onInvalid?.(e);
    }
  }

  private retryLater(): void {
    if (this.state === 'stopped') return;
    this.state = 'waiting';
    this.cancelTimer = this.deps.clock.setTimer(this.retryMs, () => {
      this.cancelTimer = undefined;
      void this.relist();
    });
  }

  private async relist(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'listing';
    this.lists++;
    try {
      const list = await this.deps.api.listConfigMaps(
        this.deps.namespace,
        `metadata.name=${this.opts.configMapName}`,
      );
      if (this.state !== 'listing') return;
      this.rv = list.metadata?.resourceVersion ?? '';
      this.deliver(list.items.find((c) => c.metadata?.name === this.opts.configMapName));
      await this.watch();
    } catch (err) {
      this.deps.log.warn({ code: isSpcdError(err) ? err.code : 'INTERNAL' }, 'desired ConfigMap list failed');
      this.retryLater();
    }
  }

  private async watch(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'watching';
    let gone = false;
    this.handle = await this.deps.api.watchConfigMaps(
      this.deps.namespace,
      {
        fieldSelector: `metadata.name=${this.opts.configMapName}`,
        resourceVersion: this.rv,
        timeoutSeconds: this.opts.watchTimeoutSeconds ?? 300,
      },
      (type, obj) => {
        if (type === 'ERROR') {
          const code = (obj as { code?: unknown }).code;
          if (code === 410) gone = true;
          return;
        }
        const cm = obj as V1ConfigMap;
        if (cm.metadata?.resourceVersion) this.rv = cm.metadata.resourceVersion;
        if (type === 'ADDED' || type === 'MODIFIED') this.deliver(cm);
        else if (type === 'DELETED') this.deliver(undefined);
      },
      (err) => {
        this.handle = undefined;
        if (this.state === 'stopped') return;
        if (gone || isSpcdError(err, 'KUBE_GONE')) {
          this.deps.log.info({ rv: this.rv }, 'desired ConfigMap watch expired (410); re-listing');
          void this.relist();
        } else if (err) {
          this.deps.log.warn({ code: (err as SpcdError).code }, 'desired ConfigMap watch failed');
          this.retryLater();
        } else {
          void this.watch().catch(() => this.retryLater());
        }
      },
    );
  }
}
