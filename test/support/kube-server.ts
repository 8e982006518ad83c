/**
 * An in-test Kubernetes API server: the subset spcd uses, on the same paths
 * and verbs, with resourceVersion bumping, 409 on a stale PUT or a duplicate
 * POST, 404, merge and strategic-merge PATCH, DELETE, and watch streams
 * (ADDED / MODIFIED / DELETED from a resourceVersion, label and name selectors)
 * that answer an expired resourceVersion with a 410 ERROR event like the real
 * apiserver.
 * With `admission` (kube-admission.ts) it authenticates several bearer tokens
 * and puts every write to the ValidatingAdmissionPolicies; without it, any
 * request is taken and any write is stored.
 * Tests drive it through the real @kubernetes/client-node.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import {
  KINDS,
  KubeStore,
  clone,
  fieldName,
  labelTerms,
  matchesLabels,
  mergePatch,
  status,
  strategicMergePatch,
  type Obj,
  type RecordedCall,
  type WatchClient,
} from './kube-store.js';
import {
  authenticate,
  refusal,
  unauthorized,
  type AdmissionOptions,
  type AdmissionUser,
  type Write,
} from './kube-admission.js';

export { mergePatch, strategicMergePatch, type RecordedCall };

export class FakeKubeServer extends KubeStore {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
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

  constructor(private readonly opts: { admission?: AdmissionOptions } = {}) {
    super();
  }

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
  kubeConfig(namespace = 'spcd-system', token = 'test-token'): { path: string; kc: KubeConfig } {
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
        `- name: spcd\n  user:\n    token: ${token}`,
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

  /** With `admission`: answers 422 and returns true when the policies refuse `write` (nothing is stored). */
  private refuses(
    res: ServerResponse,
    record: (code: number) => void,
    user: AdmissionUser | undefined,
    write: Write,
  ): boolean {
    const refused = this.opts.admission && user ? refusal(this.opts.admission, user, write) : undefined;
    if (refused) record(this.reply(res, 422, refused));
    return refused !== undefined;
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
    const admission = this.opts.admission;
    const user = admission ? authenticate(admission, req.headers.authorization) : undefined;
    if (admission && !user) {
      this.reply(res, 401, unauthorized());
      return;
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
    const write = (n: string, object: unknown, oldObject: unknown): Write => ({
      verb,
      group,
      resource: base,
      ...(m[4] ? { subResource: m[4] } : {}),
      namespace,
      name: n,
      object,
      oldObject,
    });

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
        if (this.refuses(res, record, user, write(n, body, null))) return;
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
        if (this.refuses(res, record, user, write(name, null, existing))) return;
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
        if (this.refuses(res, record, user, write(name, body, existing))) return;
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
        if (this.refuses(res, record, user, write(name, next, existing))) return;
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
