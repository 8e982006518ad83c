import { createHash } from 'node:crypto';
import type { ContainerSpec } from './spec.js';

/**
 * The spec hash decides whether a container must be recreated. It covers only
 * what the engine is asked to create, in normalized form (units converted,
 * lists sorted by spec/), so a reordered YAML key or "64m" vs 67108864 hashes
 * the same. The scheme is versioned: a change to what is hashed must bump
 * HASH_SCHEME, and spcd treats a container whose hash has another scheme as
 * "unknown, leave running" rather than "changed" (kubernetes#53644).
 */
export const HASH_SCHEME = 'v1';

export function engineFacingSpec(spec: ContainerSpec): Record<string, unknown> {
  return {
    name: spec.name,
    image: spec.image,
    command: spec.command ?? null,
    entrypoint: spec.entrypoint ?? null,
    user: spec.user ?? null,
    workingDir: spec.workingDir ?? null,
    environment: spec.environment,
    privileged: spec.privileged,
    pid: spec.pid,
    network: spec.network,
    ipc: spec.ipc,
    uts: spec.uts,
    cgroupns: spec.cgroupns,
    binds: spec.binds,
    tmpfs: spec.tmpfs,
    devices: spec.devices,
    capAdd: spec.capAdd,
    capDrop: spec.capDrop,
    securityOpt: spec.securityOpt,
    ulimits: spec.ulimits,
    sysctls: spec.sysctls,
    memoryBytes: spec.memoryBytes ?? null,
    shmSizeBytes: spec.shmSizeBytes ?? null,
    init: spec.init,
    labels: spec.labels,
    stopSignal: spec.stopSignal,
    stopGraceMs: spec.stopGraceMs,
  };
}

/** JSON with object keys sorted at every depth: equal values give equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export function specHash(spec: ContainerSpec): string {
  return `${HASH_SCHEME}-${sha256Hex(canonicalJson(engineFacingSpec(spec))).slice(0, 32)}`;
}

export function hashScheme(hash: string): string {
  const dash = hash.indexOf('-');
  return dash > 0 ? hash.slice(0, dash) : '';
}
