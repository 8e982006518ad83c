/** Route matching: method + path segments -> a route and its parameters, or NOT_FOUND / METHOD_NOT_ALLOWED. */
import { SpcdError } from '../errors.js';
import type { RouteDoc } from './openapi/document.js';

export type Params = Readonly<Record<string, string>>;

export interface RouteDef<H> {
  readonly method: 'GET' | 'POST';
  /** Template for logs and metrics, e.g. "/v1/containers/{name}". */
  readonly template: string;
  /** True for routes that change something: they are audited. */
  readonly mutating: boolean;
  /** Served on the read-only socket too; false answers READ_ONLY_SOCKET there (writes, container logs). */
  readonly readOnlySocket: boolean;
  readonly match: (segments: readonly string[]) => Params | null;
  readonly handler: H;
  /** What the route takes and answers: the OpenAPI document is assembled from these. */
  readonly doc: RouteDoc;
}

export interface Matched<H> {
  readonly route: RouteDef<H>;
  readonly params: Params;
}

/** Decodes each path segment; a malformed escape is a BAD_REQUEST. */
export function splitPath(pathname: string): string[] {
  const raw = pathname.split('/').filter((s) => s !== '');
  try {
    return raw.map((s) => decodeURIComponent(s));
  } catch {
    throw new SpcdError('BAD_REQUEST', 'malformed percent-encoding in the path');
  }
}

export function matchRoute<H>(
  routes: readonly RouteDef<H>[],
  method: string,
  segments: readonly string[],
): Matched<H> {
  const allow = new Set<string>();
  for (const route of routes) {
    const params = route.match(segments);
    if (!params) continue;
    if (route.method === method) return { route, params };
    allow.add(route.method);
  }
  const path = '/' + segments.join('/');
  if (allow.size > 0) {
    throw new SpcdError('METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}`, { allow: [...allow] });
  }
  throw new SpcdError('NOT_FOUND', `no route ${path}`, { path });
}

/** Exact segments; "{x}" takes one segment as param x. */
export function pattern(template: string): (segments: readonly string[]) => Params | null {
  const parts = template.split('/').filter((s) => s !== '');
  return (segments) => {
    if (segments.length !== parts.length) return null;
    const params: Record<string, string> = {};
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] as string;
      const s = segments[i] as string;
      if (p.startsWith('{') && p.endsWith('}')) {
        if (s === '') return null;
        params[p.slice(1, -1)] = s;
      } else if (p !== s) return null;
    }
    return params;
  };
}

/**
 * A set path is one or more segments ("compute/neutron"), so set routes match
 * a prefix, the rest (minus a fixed suffix) being the set path.
 */
export function setPattern(suffix: string | null): (segments: readonly string[]) => Params | null {
  return (segments) => {
    if (segments[0] !== 'v1' || segments[1] !== 'sets') return null;
    let rest = segments.slice(2);
    if (suffix !== null) {
      if (rest.length < 2 || rest[rest.length - 1] !== suffix) return null;
      rest = rest.slice(0, -1);
    }
    if (rest.length === 0) return null;
    return { set: rest.join('/') };
  };
}
