/**
 * An in-test Kubernetes API server: the subset spcd uses, on the same paths
 * and verbs, with resourceVersion bumping, 409 on a stale PUT or a duplicate
 * POST, 404, merge and strategic-merge PATCH, DELETE, and watch streams
 * (ADDED / MODIFIED / DELETED from a resourceVersion, label and name selectors)
 * that answer an expired resourceVersion with a 410 ERROR event like the real
 * apiserver.
 * Tests drive it through the real @kubernetes/client-node.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';

type Obj = Record<string, unknown> & { metadata: Record<string, unknown> };

interface Kind {
  readonly kind: string;
  readonly apiVersion: string;
  readonly namespaced: boolean;
}

const KINDS: Record<string, Kind> = {
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

interface WatchClient {
  readonly resource: string;
  readonly namespace: string | null;
  readonly fieldName?: string;
  readonly labelSelector: [string, string | undefined][] | null;
  readonly res: ServerResponse;
}

interface HistoryEntry {
  readonly rv: number;
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly resource: string;
  readonly obj: Obj;
}

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

function isPlain(v: unknown): v is Record<string, unknown> {
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

function status(code: number, reason: string, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

/** A label selector (`k=v,k2=v2`) as its terms, parsed once per watch: every write is matched against every watch. */
function labelTerms(selector: string | null): [string, string | undefined][] | null {
  if (!selector) return null;
  return selector.split(',').map((term) => {
    const [k, v] = term.split('=');
    return [k ?? '', v];
  });
}

function matchesLabels(obj: Obj, selector: string | null | [string, string | undefined][]): boolean {
  const terms = typeof selector === 'string' ? labelTerms(selector) : selector;
  if (!terms) return true;
  const labels = (obj.metadata.labels ?? {}) as Record<string, string>;
  return terms.every(([k, v]) => k !== '' && labels[k] === v);
}

function fieldName(selector: string | null): string | undefined {
  if (!selector) return undefined;
  const m = /^metadata\.name=(.+)$/.exec(selector);
  return m?.[1];
}

export class FakeKubeServer {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly store = new Map<string, Obj>();
  private readonly history: HistoryEntry[] = [];
  private readonly watchers = new Set<WatchClient>();
  /**
   * Label-selected watches by the last term of their selector (`k=v`), the
   * rest under '': a write is matched only against the watches that could
   * select it (1,000 waiters each watching its own label would otherwise
   * cost 1,000 matches per write).
   */
  private readonly byTerm = new Map<string, Set<WatchClient>>();
  private rv = 100;
  /** Watches asking for a resourceVersion older than this get 410 Gone. */
  private compactedRv = 0;
  private uidSeq = 0;
  /** When true, every request's connection is destroyed: the API server "does not answer". */
  unavailable = false;
  /** Requests whose connection was destroyed because the server was unavailable. */
  refused = 0;
  /** Added latency per request, ms. */
  latencyMs = 0;
  /** Added latency per PATCH, ms (a join to a slot's queue still in flight). */
  patchLatencyMs = 0;
  /** PATCH requests received and held by patchLatencyMs right now. */
  patchesHeld = 0;
  readonly calls: RecordedCall[] = [];
  port = 0;

  private scheme = 'http';

  /** `tls`: serve HTTPS with this key and certificate (spcd's in-cluster config speaks HTTPS only). */
  async start(port = 0, tls?: { key: string; cert: string }): Promise<string> {
    const handler = (req: IncomingMessage, res: ServerResponse): void => void this.handle(req, res);
    this.scheme = tls ? 'https' : 'http';
    this.server = tls ? createTlsServer({ key: tls.key, cert: tls.cert }, handler) : createServer(handler);
    this.server.keepAliveTimeout = 30_000;
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) =>
      this.server!.listen({ port, host: '127.0.0.1', backlog: 4096 }, resolve),
    );
    this.port = (this.server.address() as AddressInfo).port;
    return this.url;
  }

  get url(): string {
    return `${this.scheme}://127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
    this.byTerm.clear();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** A kubeconfig file pointing at this server, and a KubeConfig loaded from it. */
  kubeConfig(namespace = 'spcd-system'): { path: string; kc: KubeConfig } {
    const dir = mkdtempSync(join(tmpdir(), 'spcd-kubeconfig-'));
    const path = join(dir, 'config');
    writeFileSync(
      path,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        `- name: fake\n  cluster:\n    server: ${this.url}\n    insecure-skip-tls-verify: true`,
        'users:',
        '- name: spcd\n  user:\n    token: test-token',
        'contexts:',
        `- name: fake\n  context:\n    cluster: fake\n    user: spcd\n    namespace: ${namespace}`,
        'current-context: fake',
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const kc = new KubeConfig();
    kc.loadFromFile(path);
    return { path, kc };
  }

  // ---- direct access for tests ------------------------------------------

  private key(resource: string, namespace: string | null, name: string): string {
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

  private save(
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

  private termOf(w: WatchClient): string {
    const last = w.labelSelector?.[w.labelSelector.length - 1];
    return last ? `${last[0]}=${last[1] ?? ''}` : '';
  }

  private addWatcher(w: WatchClient): void {
    this.watchers.add(w);
    const t = this.termOf(w);
    let set = this.byTerm.get(t);
    if (!set) this.byTerm.set(t, (set = new Set()));
    set.add(w);
  }

  private removeWatcher(w: WatchClient): void {
    this.watchers.delete(w);
    const t = this.termOf(w);
    this.byTerm.get(t)?.delete(w);
    if (this.byTerm.get(t)?.size === 0) this.byTerm.delete(t);
  }

  /** Every watch this entry may concern: those without a selector, and those whose last term the object carries. */
  private broadcast(e: HistoryEntry, line: string): void {
    for (const w of this.byTerm.get('') ?? []) this.send(w, e, line);
    const labels = (e.obj.metadata.labels ?? {}) as Record<string, string>;
    for (const [k, v] of Object.entries(labels))
      for (const w of this.byTerm.get(`${k}=${v}`) ?? []) this.send(w, e, line);
  }

  private send(w: WatchClient, e: HistoryEntry, line?: string): void {
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

  private deleteObj(resource: string, namespace: string | null, name: string, existing: Obj): Obj {
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

  // ---- HTTP -------------------------------------------------------------

  private async readBody(req: IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return text ? (JSON.parse(text) as unknown) : undefined;
  }

  private reply(res: ServerResponse, code: number, body: unknown): number {
    const text = JSON.stringify(body);
    res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
    return code;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.unavailable) {
      this.refused++;
      req.socket.destroy();
      return;
    }
    if (this.latencyMs > 0) await new Promise((r) => setTimeout(r, this.latencyMs));
    if (req.method === 'PATCH' && this.patchLatencyMs > 0) {
      this.patchesHeld++;
      await new Promise((r) => setTimeout(r, this.patchLatencyMs));
      this.patchesHeld--;
    }
    const url = new URL(req.url ?? '/', this.url);
    // /api/v1/... or /apis/<group>/v1/...
    const m =
      /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?([a-z]+)(?:\/([^/]+))?(?:\/(status))?$/.exec(url.pathname) ??
      /^\/apis\/coordination\.k8s\.io\/v1\/(?:namespaces\/([^/]+)\/)?(leases)(?:\/([^/]+))?()$/.exec(
        url.pathname,
      );
    const method = req.method ?? 'GET';
    const group = url.pathname.startsWith('/apis/coordination.k8s.io') ? 'coordination.k8s.io' : '';
    if (!m || !KINDS[m[2]!]) {
      this.reply(res, 404, status(404, 'NotFound', `no route ${method} ${url.pathname}`));
      return;
    }
    const namespace = m[1] ? decodeURIComponent(m[1]) : null;
    const base = m[2]!;
    const name = m[3] ? decodeURIComponent(m[3]) : null;
    const resource = m[4] ? `${base}/${m[4]}` : base;
    const watch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const verb =
      method === 'GET'
        ? name
          ? 'get'
          : watch
            ? 'watch'
            : 'list'
        : method === 'POST'
          ? 'create'
          : method === 'PUT'
            ? 'update'
            : method === 'PATCH'
              ? 'patch'
              : method === 'DELETE'
                ? 'delete'
                : method.toLowerCase();
    const contentType = req.headers['content-type'];
    const record = (code: number) =>
      this.calls.push({ method, verb, group, resource, namespace, name, status: code, contentType });

    try {
      if (KINDS[base]!.namespaced !== (namespace !== null) && !(verb === 'list' || verb === 'watch')) {
        record(this.reply(res, 404, status(404, 'NotFound', 'wrong scope')));
        return;
      }
      if (verb === 'watch') {
        record(200);
        this.startWatch(url, base, namespace, res);
        return;
      }
      if (verb === 'list') {
        const terms = labelTerms(url.searchParams.get('labelSelector'));
        const f = fieldName(url.searchParams.get('fieldSelector'));
        const prefix = `${base}/${namespace ?? ''}/`;
        // selected first, then copied: the reply is serialised at once, nothing else holds it
        const items = [...this.store.entries()]
          .filter(([k, o]) => k.startsWith(prefix) && matchesLabels(o, terms))
          .filter(([, o]) => f === undefined || o.metadata.name === f)
          .map(([, o]) => o);
        const kind = KINDS[base]!;
        record(
          this.reply(res, 200, {
            apiVersion: kind.apiVersion,
            kind: `${kind.kind}List`,
            metadata: { resourceVersion: String(this.rv) },
            items,
          }),
        );
        return;
      }
      if (verb === 'create') {
        const body = (await this.readBody(req)) as Obj;
        const n = String(body?.metadata?.name ?? '');
        if (!n) {
          record(this.reply(res, 422, status(422, 'Invalid', 'metadata.name required')));
          return;
        }
        if (this.store.has(this.key(base, namespace, n))) {
          record(this.reply(res, 409, status(409, 'AlreadyExists', `${base} "${n}" already exists`)));
          return;
        }
        delete body.metadata.resourceVersion;
        record(this.reply(res, 201, this.save(base, namespace, n, body, 'ADDED', undefined)));
        return;
      }
      const existing = name ? this.store.get(this.key(base, namespace, name)) : undefined;
      if (!existing || !name) {
        record(this.reply(res, 404, status(404, 'NotFound', `${base} "${name}" not found`)));
        return;
      }
      if (verb === 'get') {
        record(this.reply(res, 200, existing));
        return;
      }
      if (verb === 'delete') {
        record(this.reply(res, 200, this.deleteObj(base, namespace, name, existing)));
        return;
      }
      if (verb === 'update') {
        const body = (await this.readBody(req)) as Obj;
        const sent = body?.metadata?.resourceVersion;
        if (sent !== undefined && sent !== existing.metadata.resourceVersion) {
          record(
            this.reply(
              res,
              409,
              status(
                409,
                'Conflict',
                `Operation cannot be fulfilled on ${base} "${name}": the object has been modified`,
              ),
            ),
          );
          return;
        }
        if (resource !== base) {
          record(this.reply(res, 405, status(405, 'MethodNotAllowed', 'no PUT on subresources here')));
          return;
        }
        record(this.reply(res, 200, this.save(base, namespace, name, body, 'MODIFIED', existing)));
        return;
      }
      if (verb === 'patch') {
        const patch = await this.readBody(req);
        let next: Obj;
        if (contentType === 'application/merge-patch+json') next = mergePatch(existing, patch) as Obj;
        else if (contentType === 'application/strategic-merge-patch+json')
          next = strategicMergePatch(existing, patch) as Obj;
        else {
          record(this.reply(res, 415, status(415, 'UnsupportedMediaType', `patch type ${contentType}`)));
          return;
        }
        // nodes/status changes only status; nodes changes everything but status
        if (resource === 'nodes/status') next = { ...clone(existing), status: next.status };
        else if (base === 'nodes') next = { ...next, status: clone(existing.status) };
        const prv = (patch as Obj | undefined)?.metadata?.resourceVersion;
        if (prv !== undefined && prv !== existing.metadata.resourceVersion) {
          record(this.reply(res, 409, status(409, 'Conflict', 'the object has been modified')));
          return;
        }
        record(this.reply(res, 200, this.save(base, namespace, name, next, 'MODIFIED', existing)));
        return;
      }
      record(this.reply(res, 405, status(405, 'MethodNotAllowed', method)));
    } catch (err) {
      record(this.reply(res, 400, status(400, 'BadRequest', String(err))));
    }
  }

  private startWatch(url: URL, resource: string, namespace: string | null, res: ServerResponse): void {
    const rvText = url.searchParams.get('resourceVersion');
    const from = rvText ? Number(rvText) : this.rv;
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    const fn = fieldName(url.searchParams.get('fieldSelector'));
    const w: WatchClient = {
      resource,
      namespace,
      res,
      labelSelector: labelTerms(url.searchParams.get('labelSelector')),
      ...(fn !== undefined ? { fieldName: fn } : {}),
    };
    if (!rvText) {
      // No resourceVersion: "get state and start at most recent": every current object as ADDED first.
      for (const o of this.list(resource, namespace))
        this.send(w, { rv: this.rv, type: 'ADDED', resource, obj: o });
    }
    if (from < this.compactedRv) {
      // What kube-apiserver does: 200, then one ERROR event carrying a 410 Status, then close.
      res.end(
        JSON.stringify({
          type: 'ERROR',
          object: status(410, 'Expired', `too old resource version: ${from} (${this.compactedRv})`),
        }) + '\n',
      );
      return;
    }
    // History is in resourceVersion order: replay from the first entry after `from`.
    let lo = 0;
    for (let hi = this.history.length; lo < hi;) {
      const mid = (lo + hi) >> 1;
      if (this.history[mid]!.rv > from) hi = mid;
      else lo = mid + 1;
    }
    for (let i = lo; i < this.history.length; i++) this.send(w, this.history[i]!);
    this.addWatcher(w);
    const timeout = Number(url.searchParams.get('timeoutSeconds') ?? 0);
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
    res.on('close', () => {
      if (timer) clearTimeout(timer);
      this.removeWatcher(w);
    });
  }
}
