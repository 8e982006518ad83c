/**
 * The objects of the in-test Kubernetes API server (kube-server.ts): the
 * store, its resourceVersions and watch history, and the open watch streams
 * a write is sent to. Tests read and write it directly as an administrator
 * would (kubectl get / apply / delete).
 */
import type { ServerResponse } from 'node:http';

export type Obj = Record<string, unknown> & { metadata: Record<string, unknown> };

export interface Kind {
  readonly kind: string;
  readonly apiVersion: string;
  readonly namespaced: boolean;
}

export const KINDS: Record<string, Kind> = {
  nodes: { kind: 'Node', apiVersion: 'v1', namespaced: false },
  events: { kind: 'Event', apiVersion: 'v1', namespaced: true },
  configmaps: { kind: 'ConfigMap', apiVersion: 'v1', namespaced: true },
  leases: { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', namespaced: true },
};

export interface RecordedCall {
  readonly method: string;
  readonly verb: string; // get list watch create update patch
  readonly group: string;
  readonly resource: string; // with subresource: nodes/status
  readonly namespace: string | null;
  readonly name: string | null;
  readonly status: number;
  readonly contentType?: string;
}

export interface WatchClient {
  readonly resource: string;
  readonly namespace: string | null;
  readonly fieldName?: string;
  readonly labelSelector: [string, string | undefined][] | null;
  readonly res: ServerResponse;
}

export interface HistoryEntry {
  readonly rv: number;
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly resource: string;
  readonly obj: Obj;
}

export function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

export function isPlain(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlain(patch)) return clone(patch);
  const out: Record<string, unknown> = isPlain(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** The strategic-merge subset spcd relies on: lists named `conditions` merge by `type`. */
export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlain(patch)) return clone(patch);
  const out: Record<string, unknown> = isPlain(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else if (k === 'conditions' && Array.isArray(v)) {
      const list = Array.isArray(out[k]) ? [...(out[k] as Record<string, unknown>[])] : [];
      for (const item of v as Record<string, unknown>[]) {
        const i = list.findIndex((c) => c.type === item.type);
        if (i >= 0) list[i] = strategicMergePatch(list[i], item) as Record<string, unknown>;
        else list.push(clone(item));
      }
      out[k] = list;
    } else out[k] = strategicMergePatch(out[k], v);
  }
  return out;
}

export function status(code: number, reason: string, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

/** A label selector (`k=v,k2=v2`) as its terms, parsed once per watch: every write is matched against every watch. */
export function labelTerms(selector: string | null): [string, string | undefined][] | null {
  if (!selector) return null;
  return selector.split(',').map((term) => {
    const [k, v] = term.split('=');
    return [k ?? '', v];
  });
}

export function matchesLabels(obj: Obj, selector: string | null | [string, string | undefined][]): boolean {
  const terms = typeof selector === 'string' ? labelTerms(selector) : selector;
  if (!terms) return true;
  const labels = (obj.metadata.labels ?? {}) as Record<string, string>;
  return terms.every(([k, v]) => k !== '' && labels[k] === v);
}

export function fieldName(selector: string | null): string | undefined {
  if (!selector) return undefined;
  const m = /^metadata\.name=(.+)$/.exec(selector);
  return m?.[1];
}

export class KubeStore {
  protected readonly store = new Map<string, Obj>();
  protected readonly history: HistoryEntry[] = [];
  protected readonly watchers = new Set<WatchClient>();
  /**
   * Label-selected watches by the last term of their selector (`k=v`), the
   * rest under '': a write is matched only against the watches that could
   * select it (1,000 waiters each watching its own label would otherwise
   * cost 1,000 matches per write).
   */
  protected readonly byTerm = new Map<string, Set<WatchClient>>();
  protected rv = 100;
  /** Watches asking for a resourceVersion older than this get 410 Gone. */
  protected compactedRv = 0;
  protected uidSeq = 0;

  // ---- direct access for tests ------------------------------------------

  protected key(resource: string, namespace: string | null, name: string): string {
    return `${resource}/${namespace ?? ''}/${name}`;
  }

  get(resource: string, namespace: string | null, name: string): Obj | undefined {
    const o = this.store.get(this.key(resource, namespace, name));
    return o ? clone(o) : undefined;
  }

  list(resource: string, namespace: string | null): Obj[] {
    const prefix = `${resource}/${namespace ?? ''}/`;
    return [...this.store.entries()].filter(([k]) => k.startsWith(prefix)).map(([, v]) => clone(v));
  }

  /** Creates or replaces an object as an administrator would (kubectl apply). */
  put(resource: string, namespace: string | null, obj: Record<string, unknown>): Obj {
    const o = clone(obj) as Obj;
    o.metadata = { ...(o.metadata ?? {}) };
    const name = String(o.metadata.name);
    const existing = this.store.get(this.key(resource, namespace, name));
    return this.save(resource, namespace, name, o, existing ? 'MODIFIED' : 'ADDED', existing);
  }

  /** Forgets watch history up to now: older resourceVersions get 410 Gone. */
  compact(): void {
    this.compactedRv = this.rv;
    this.history.length = 0;
  }

  /** Ends every open watch stream, as an apiserver does at its timeout. */
  closeWatches(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
    this.byTerm.clear();
  }

  /** Open watch streams on this resource (and name, when the watch selects one). */
  openWatches(resource: string, namespace: string | null, name?: string): number {
    return [...this.watchers].filter(
      (w) =>
        w.resource === resource && w.namespace === namespace && (name === undefined || w.fieldName === name),
    ).length;
  }

  get resourceVersion(): number {
    return this.rv;
  }

  protected save(
    resource: string,
    namespace: string | null,
    name: string,
    obj: Obj,
    type: 'ADDED' | 'MODIFIED',
    existing: Obj | undefined,
  ): Obj {
    const kind = KINDS[resource.split('/')[0]!]!;
    this.rv++;
    obj.apiVersion = kind.apiVersion;
    obj.kind = kind.kind;
    obj.metadata = {
      ...obj.metadata,
      name,
      ...(kind.namespaced ? { namespace } : {}),
      uid: existing?.metadata.uid ?? `uid-${++this.uidSeq}`,
      creationTimestamp:
        existing?.metadata.creationTimestamp ?? new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      resourceVersion: String(this.rv),
    };
    this.store.set(this.key(resource, namespace, name), obj);
    const entry: HistoryEntry = { rv: this.rv, type, resource, obj: clone(obj) };
    this.history.push(entry);
    if (this.history.length > 10_000) {
      // What was dropped can no longer be replayed: older versions get 410 Gone.
      this.compactedRv = this.history[5_000]!.rv - 1;
      this.history.splice(0, 5_000);
    }
    const line = JSON.stringify({ type: entry.type, object: entry.obj }) + '\n';
    this.broadcast(entry, line);
    return obj;
  }

  protected termOf(w: WatchClient): string {
    const last = w.labelSelector?.[w.labelSelector.length - 1];
    return last ? `${last[0]}=${last[1] ?? ''}` : '';
  }

  protected addWatcher(w: WatchClient): void {
    this.watchers.add(w);
    const t = this.termOf(w);
    let set = this.byTerm.get(t);
    if (!set) this.byTerm.set(t, (set = new Set()));
    set.add(w);
  }

  protected removeWatcher(w: WatchClient): void {
    this.watchers.delete(w);
    const t = this.termOf(w);
    this.byTerm.get(t)?.delete(w);
    if (this.byTerm.get(t)?.size === 0) this.byTerm.delete(t);
  }

  /** Every watch this entry may concern: those without a selector, and those whose last term the object carries. */
  protected broadcast(e: HistoryEntry, line: string): void {
    for (const w of this.byTerm.get('') ?? []) this.send(w, e, line);
    const labels = (e.obj.metadata.labels ?? {}) as Record<string, string>;
    for (const [k, v] of Object.entries(labels))
      for (const w of this.byTerm.get(`${k}=${v}`) ?? []) this.send(w, e, line);
  }

  protected send(w: WatchClient, e: HistoryEntry, line?: string): void {
    if (w.resource !== e.resource) return;
    if (w.namespace !== null && e.obj.metadata.namespace !== w.namespace) return;
    if (w.fieldName !== undefined && e.obj.metadata.name !== w.fieldName) return;
    // Label-selected watches get only objects in the selection.
    if (!matchesLabels(e.obj, w.labelSelector)) return;
    w.res.write(line ?? JSON.stringify({ type: e.type, object: e.obj }) + '\n');
  }

  /** Deletes an object as an administrator would (kubectl delete): watchers see DELETED. */
  remove(resource: string, namespace: string | null, name: string): boolean {
    const existing = this.store.get(this.key(resource, namespace, name));
    if (!existing) return false;
    this.deleteObj(resource, namespace, name, existing);
    return true;
  }

  protected deleteObj(resource: string, namespace: string | null, name: string, existing: Obj): Obj {
    this.rv++;
    this.store.delete(this.key(resource, namespace, name));
    const obj = clone(existing);
    obj.metadata.resourceVersion = String(this.rv);
    const entry: HistoryEntry = { rv: this.rv, type: 'DELETED', resource, obj };
    this.history.push(entry);
    const line = JSON.stringify({ type: entry.type, object: entry.obj }) + '\n';
    this.broadcast(entry, line);
    return obj;
  }
}
