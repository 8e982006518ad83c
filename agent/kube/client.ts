/**
 * KubeClient: the narrow door to the Kubernetes API. Its methods are exactly
 * the names in KUBE_CALLS (calls.ts); every call carries a deadline, and every
 * failure becomes a typed SpcdError (never classified by message text).
 */
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  Observable,
  PatchStrategy,
  Watch,
  type ConfigurationOptions,
  type CoreV1Event,
  type KubeConfig,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
  type V1ConfigMap,
  type V1ConfigMapList,
  type V1Lease,
  type V1LeaseList,
  type V1Node,
} from '@kubernetes/client-node';
import type { Agent } from 'node:http';
import { SpcdError } from '../errors.js';
import { KUBE_CALLS, type KubeCallName } from './calls.js';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchHandle {
  stop(): void;
}

/** One method per row of KUBE_CALLS; nothing else reaches the API server. */
export interface KubeApi {
  readNode(name: string): Promise<V1Node>;
  patchNode(name: string, mergePatch: object): Promise<V1Node>;
  patchNodeStatus(name: string, strategicPatch: object): Promise<V1Node>;
  createEvent(namespace: string, event: CoreV1Event): Promise<CoreV1Event>;
  patchEvent(namespace: string, name: string, mergePatch: object): Promise<CoreV1Event>;
  readLease(namespace: string, name: string): Promise<V1Lease>;
  createLease(namespace: string, lease: V1Lease): Promise<V1Lease>;
  replaceLease(namespace: string, name: string, lease: V1Lease): Promise<V1Lease>;
  patchLease(namespace: string, name: string, mergePatch: object): Promise<V1Lease>;
  listLeases(namespace: string, labelSelector?: string): Promise<V1LeaseList>;
  listConfigMaps(namespace: string, fieldSelector?: string): Promise<V1ConfigMapList>;
  watchLeases(
    namespace: string,
    opts: {
      fieldSelector?: string;
      labelSelector?: string;
      resourceVersion: string;
      timeoutSeconds?: number;
    },
    onEvent: (type: WatchEventType, obj: V1Lease | Record<string, unknown>) => void,
    onDone: (err: SpcdError | null) => void,
  ): Promise<WatchHandle>;
  watchConfigMaps(
    namespace: string,
    opts: { fieldSelector?: string; resourceVersion: string; timeoutSeconds?: number },
    onEvent: (type: WatchEventType, obj: V1ConfigMap | Record<string, unknown>) => void,
    onDone: (err: SpcdError | null) => void,
  ): Promise<WatchHandle>;
}

// The compiler keeps KubeApi and KUBE_CALLS naming the same calls.
type SameKeys<A, B> = [Exclude<keyof A, keyof B>, Exclude<keyof B, keyof A>] extends [never, never]
  ? true
  : never;
const _tableMatchesApi: SameKeys<KubeApi, typeof KUBE_CALLS> = true;
void _tableMatchesApi;

export interface KubeClientOptions {
  /** Deadline for one ordinary call (not watches). Default 10 s. */
  readonly callTimeoutMs?: number;
}

/** Maps anything a client-node call throws to a typed error. */
export function mapKubeError(err: unknown, call: KubeCallName): SpcdError {
  if (err instanceof SpcdError) return err;
  const details = { call, verb: KUBE_CALLS[call].verb, resource: KUBE_CALLS[call].resource };
  if (err instanceof ApiException) {
    const status = (err as ApiException<unknown>).code;
    const d = { ...details, status };
    if (status === 404) return new SpcdError('NOT_FOUND', `${call}: not found`, d, { cause: err });
    if (status === 409) {
      const code = KUBE_CALLS[call].resource === 'leases' ? 'LEASE_CONFLICT' : 'CONFLICT';
      return new SpcdError(code, `${call}: conflict`, d, { cause: err });
    }
    if (status === 429 || status >= 500)
      return new SpcdError('KUBE_UNAVAILABLE', `${call}: API server answered ${status}`, d, { cause: err });
    return new SpcdError('KUBE_REJECTED', `${call}: API server refused with ${status}`, d, { cause: err });
  }
  // connection refused, reset, DNS, our own deadline (AbortError): all "does not answer"
  const msg = err instanceof Error ? err.name : 'error';
  return new SpcdError('KUBE_UNAVAILABLE', `${call}: API server unreachable (${msg})`, details, {
    cause: err,
  });
}

/**
 * client-node builds a new http(s) Agent for every request (its TLS options
 * from the kubeconfig), so each call opens a fresh connection: about 5-10 ms
 * each here, and a TLS handshake each against a real API server. The first
 * agent it builds is kept, with keep-alive on, and handed to every later call
 * of this client: same TLS options, reused connections.
 */
class SharedAgent {
  private agent: Agent | undefined;
  apply(ctx: RequestContext): void {
    const fresh = ctx.getAgent();
    if (!this.agent && fresh) {
      this.agent = fresh;
      // node's Agent reads keepAlive at run time when a socket frees.
      (fresh as unknown as { keepAlive: boolean }).keepAlive = true;
    }
    if (this.agent) ctx.setAgent(this.agent);
  }
  destroy(): void {
    this.agent?.destroy();
  }
}

function options(timeoutMs: number, shared: SharedAgent, contentType?: string): ConfigurationOptions {
  // ObjectParamAPI hands options to the Observable API: middleware returns Observables.
  const m: ObservableMiddleware = {
    pre: (ctx: RequestContext) => {
      shared.apply(ctx);
      ctx.setSignal(AbortSignal.timeout(timeoutMs));
      if (contentType) ctx.setHeaderParam('Content-Type', contentType);
      return new Observable(Promise.resolve(ctx));
    },
    post: (res: ResponseContext) => new Observable(Promise.resolve(res)),
  };
  return { middleware: [m], middlewareMergeStrategy: 'append' };
}

export class KubeClient implements KubeApi {
  private readonly core: CoreV1Api;
  private readonly coord: CoordinationV1Api;
  private readonly watcher: Watch;
  private readonly timeoutMs: number;
  private readonly shared = new SharedAgent();

  constructor(kubeConfig: KubeConfig, opts: KubeClientOptions = {}) {
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.coord = kubeConfig.makeApiClient(CoordinationV1Api);
    this.watcher = new Watch(kubeConfig);
    this.timeoutMs = opts.callTimeoutMs ?? 10_000;
  }

  private opts(contentType?: string): ConfigurationOptions {
    return options(this.timeoutMs, this.shared, contentType);
  }

  /** Closes the kept connections (idle sockets would otherwise hold the process open). */
  close(): void {
    this.shared.destroy();
  }

  private async call<T>(name: KubeCallName, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw mapKubeError(err, name);
    }
  }

  readNode(name: string): Promise<V1Node> {
    return this.call('readNode', () => this.core.readNode({ name }, this.opts()));
  }

  patchNode(name: string, mergePatch: object): Promise<V1Node> {
    return this.call('patchNode', () =>
      this.core.patchNode({ name, body: mergePatch }, this.opts(PatchStrategy.MergePatch)),
    );
  }

  patchNodeStatus(name: string, strategicPatch: object): Promise<V1Node> {
    // Strategic merge: status.conditions merge by `type`, so the kubelet's own
    // conditions stay untouched (a JSON merge patch would replace the list).
    return this.call('patchNodeStatus', () =>
      this.core.patchNodeStatus({ name, body: strategicPatch }, this.opts(PatchStrategy.StrategicMergePatch)),
    );
  }

  createEvent(namespace: string, event: CoreV1Event): Promise<CoreV1Event> {
    return this.call('createEvent', () =>
      this.core.createNamespacedEvent({ namespace, body: event }, this.opts()),
    );
  }

  patchEvent(namespace: string, name: string, mergePatch: object): Promise<CoreV1Event> {
    return this.call('patchEvent', () =>
      this.core.patchNamespacedEvent(
        { namespace, name, body: mergePatch },
        this.opts(PatchStrategy.MergePatch),
      ),
    );
  }

  readLease(namespace: string, name: string): Promise<V1Lease> {
    return this.call('readLease', () => this.coord.readNamespacedLease({ namespace, name }, this.opts()));
  }

  createLease(namespace: string, lease: V1Lease): Promise<V1Lease> {
    return this.call('createLease', () =>
      this.coord.createNamespacedLease({ namespace, body: lease }, this.opts()),
    );
  }

  replaceLease(namespace: string, name: string, lease: V1Lease): Promise<V1Lease> {
    return this.call('replaceLease', () =>
      this.coord.replaceNamespacedLease({ namespace, name, body: lease }, this.opts()),
    );
  }

  patchLease(namespace: string, name: string, mergePatch: object): Promise<V1Lease> {
    return this.call('patchLease', () =>
      this.coord.patchNamespacedLease(
        { namespace, name, body: mergePatch },
        this.opts(PatchStrategy.MergePatch),
      ),
    );
  }

  listLeases(namespace: string, labelSelector?: string): Promise<V1LeaseList> {
    return this.call('listLeases', () =>
      this.coord.listNamespacedLease(
        labelSelector ? { namespace, labelSelector } : { namespace },
        this.opts(),
      ),
    );
  }

  listConfigMaps(namespace: string, fieldSelector?: string): Promise<V1ConfigMapList> {
    return this.call('listConfigMaps', () =>
      this.core.listNamespacedConfigMap(
        fieldSelector ? { namespace, fieldSelector } : { namespace },
        this.opts(),
      ),
    );
  }

  watchConfigMaps(
    namespace: string,
    opts: { fieldSelector?: string; resourceVersion: string; timeoutSeconds?: number },
    onEvent: (type: WatchEventType, obj: V1ConfigMap | Record<string, unknown>) => void,
    onDone: (err: SpcdError | null) => void,
  ): Promise<WatchHandle> {
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`;
    return this.watchPath('watchConfigMaps', path, opts, onEvent, onDone);
  }

  watchLeases(
    namespace: string,
    opts: {
      fieldSelector?: string;
      labelSelector?: string;
      resourceVersion: string;
      timeoutSeconds?: number;
    },
    onEvent: (type: WatchEventType, obj: V1Lease | Record<string, unknown>) => void,
    onDone: (err: SpcdError | null) => void,
  ): Promise<WatchHandle> {
    const path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
    return this.watchPath('watchLeases', path, opts, onEvent, onDone);
  }

  private async watchPath(
    call: 'watchConfigMaps' | 'watchLeases',
    path: string,
    opts: {
      fieldSelector?: string;
      labelSelector?: string;
      resourceVersion: string;
      timeoutSeconds?: number;
    },
    onEvent: (type: WatchEventType, obj: Record<string, unknown>) => void,
    onDone: (err: SpcdError | null) => void,
  ): Promise<WatchHandle> {
    const query: Record<string, string | number | boolean | undefined> = {
      resourceVersion: opts.resourceVersion,
      allowWatchBookmarks: true,
      fieldSelector: opts.fieldSelector,
      labelSelector: opts.labelSelector,
      timeoutSeconds: opts.timeoutSeconds ?? 300,
    };
    let stopped = false;
    const controller = await this.watcher.watch(
      path,
      query,
      (type: string, obj: Record<string, unknown>) => {
        if (!stopped) onEvent(type as WatchEventType, obj);
      },
      (err: unknown) => {
        if (stopped) return;
        if (!err) return onDone(null);
        const status = (err as { statusCode?: unknown }).statusCode;
        if (status === 410) {
          onDone(new SpcdError('KUBE_GONE', 'watch: resourceVersion too old', { call }));
        } else if (typeof status === 'number' && status < 500 && status !== 429) {
          onDone(new SpcdError('KUBE_REJECTED', `watch refused with ${status}`, { call, status }));
        } else {
          onDone(mapKubeError(err, call));
        }
      },
    );
    return {
      stop: () => {
        stopped = true;
        controller.abort();
      },
    };
  }
}
