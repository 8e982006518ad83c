/**
 * Loads dockerode with the modules it requires for transports spcd never uses
 * deferred until first use.
 *
 * dockerode requires, when it loads, ssh2 (docker-modem's ssh:// transport),
 * @grpc/grpc-js + @grpc/proto-loader (BuildKit sessions) and tar-fs +
 * @balena/dockerignore (build contexts). spcd speaks to the engine over a unix
 * socket and never builds images, yet those modules cost about 25 MB of the
 * daemon's memory: ssh2 alone sets up a 16 MiB WebAssembly heap for its
 * poly1305 code. See docs/decisions/0006-memory-budget.md.
 *
 * Each deferred module is put in the CommonJS cache as a stand-in whose
 * properties load the real module on first access; nothing is stubbed out, so
 * an ssh:// engine or an image build would still work, only later.
 */
import { createRequire } from 'node:module';
import type DockerodeType from 'dockerode';

type Exports = Record<string | symbol, unknown>;

/** What dockerode's own code reads from each module while it loads. */
interface Deferral {
  /** The chain of packages from dockerode to the one whose code requires it. */
  readonly requiredBy: readonly string[];
  readonly id: string;
  /** Exports read at load time: handed out as constructors that load on first call. */
  readonly readAtLoad: readonly string[];
  /** The module's exports are a function (called later, never at load). */
  readonly callable?: boolean;
}

export const DEFERRED: readonly Deferral[] = [
  { requiredBy: ['dockerode', 'docker-modem'], id: 'ssh2', readAtLoad: ['Client'] },
  { requiredBy: ['dockerode'], id: '@grpc/grpc-js', readAtLoad: [] },
  { requiredBy: ['dockerode'], id: '@grpc/proto-loader', readAtLoad: [] },
  // Image builds: a build context is a tar, filtered by .dockerignore.
  { requiredBy: ['dockerode'], id: 'tar-fs', readAtLoad: [] },
  { requiredBy: ['dockerode'], id: '@balena/dockerignore', readAtLoad: [], callable: true },
];

const here = createRequire(import.meta.url);

/** A require() that resolves as the last package of `chain` does. */
function requireFrom(chain: readonly string[]): NodeJS.Require {
  let req = here;
  for (const pkg of chain) req = createRequire(req.resolve(pkg));
  return req;
}

/**
 * Puts a stand-in for `filename` in the CommonJS cache. Its properties load
 * the real module (replacing the stand-in) on first access, except those in
 * `readAtLoad`, which are constructors that load it when first called.
 */
function defer(req: NodeJS.Require, filename: string, d: Deferral): void {
  if (req.cache[filename]) return; // already loaded (for real or deferred)
  let real: Exports | undefined;
  const load = (): Exports => {
    if (!real) {
      delete req.cache[filename];
      real = req(filename) as Exports;
    }
    return real;
  };
  const late = new Map<string, unknown>();
  for (const key of d.readAtLoad) {
    late.set(key, function (this: unknown, ...args: unknown[]): unknown {
      const target = load()[key] as new (...a: unknown[]) => unknown;
      return new.target
        ? Reflect.construct(target, args)
        : (target as unknown as (...a: unknown[]) => unknown).apply(this, args);
    });
  }
  // An arrow function as the target of a callable stand-in: it has no
  // non-configurable own properties for the traps below to contradict.
  const target = (d.callable ? () => undefined : {}) as Exports;
  const exports = new Proxy(target, {
    apply: (_t, self, args) => Reflect.apply(load() as unknown as (...a: unknown[]) => unknown, self, args),
    get: (_t, key) => (typeof key === 'string' && late.has(key) && !real ? late.get(key) : load()[key]),
    has: (_t, key) => key in load(),
    ownKeys: () => Reflect.ownKeys(load()),
    getOwnPropertyDescriptor: (_t, key) => {
      const desc = Reflect.getOwnPropertyDescriptor(load(), key);
      return desc ? { ...desc, configurable: true } : undefined;
    },
  });
  req.cache[filename] = {
    id: filename,
    filename,
    loaded: true,
    exports,
    children: [],
    paths: [],
  } as unknown as NodeJS.Module;
}

/**
 * dockerode's constructor, with the deferrals above in place before it first
 * loads (require's own cache makes later calls cheap and idempotent).
 */
export function loadDockerode(): typeof DockerodeType {
  for (const d of DEFERRED) {
    const req = requireFrom(d.requiredBy);
    defer(req, req.resolve(d.id), d);
  }
  return here('dockerode') as typeof DockerodeType;
}
