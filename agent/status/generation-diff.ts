/**
 * What changed between two generations of a container (GET
 * /v1/containers/{name}/generations/diff): image, digest, spec fields, and
 * config files by content digest, with a unified diff of the rendered
 * content, secrets masked, when both versions are still kept on disk.
 */
import type { ConfigFileChangeView, GenerationDiffView, GenerationView } from '../api/types.js';
import { SpcdError } from '../errors.js';
import { specChanges } from '../model/spec-diff.js';
import { diffConfigs } from '../render/diff.js';
import { maskSecrets } from '../render/mask.js';
import type { ConfigFileDigest, ContainerRecord, GenerationRecord } from '../state/store.js';
import { fileDigests } from '../config/template-config.js';

/** The rendered config versions spcd keeps on disk (current and previous), and the values to mask. */
export interface ConfigVersions {
  files(name: string, configHash: string): Promise<ReadonlyMap<string, string> | undefined>;
  secrets(): ReadonlySet<string>;
}

export function generationView(g: GenerationRecord): GenerationView {
  return {
    generation: g.generation,
    image: g.image,
    imageDigest: g.imageDigest,
    specHash: g.specHash,
    configHash: g.configHash,
    createdAt: g.createdAt,
    outcome: g.outcome,
    ...(g.reason !== undefined ? { reason: g.reason } : {}),
    ...(g.from !== undefined ? { from: g.from } : {}),
  };
}

function maskValue(v: unknown, secrets: ReadonlySet<string>): unknown {
  if (typeof v === 'string') return maskSecrets(v, secrets);
  if (Array.isArray(v)) return v.map((x) => maskValue(x, secrets));
  if (typeof v === 'object' && v !== null)
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, maskValue(x, secrets)]));
  return v;
}

const NO_FILES: ReadonlyMap<string, string> = new Map();

export async function generationDiff(
  name: string,
  rec: ContainerRecord | undefined,
  fromN: number,
  toN: number,
  versions: ConfigVersions | undefined,
): Promise<GenerationDiffView> {
  const find = (n: number): GenerationRecord => {
    const g = rec?.generations.find((x) => x.generation === n);
    if (g) return g;
    const kept = rec?.generations.map((x) => x.generation).join(', ') || 'none';
    throw new SpcdError('NOT_FOUND', `container ${name} has no generation ${n} (kept: ${kept})`, {
      container: name,
      generation: n,
    });
  };
  const a = find(fromN);
  const b = find(toN);
  const secrets = versions?.secrets() ?? new Set<string>();
  const spec = specChanges(a.spec, b.spec).map(
    (c) => maskValue(c, secrets) as GenerationDiffView['spec'][number],
  );
  const changed = a.configHash !== b.configHash;
  let files: ConfigFileChangeView[] = [];
  let filesKnown = true;
  if (changed) {
    const content = async (g: GenerationRecord): Promise<ReadonlyMap<string, string> | undefined> =>
      g.configHash === 'none' ? NO_FILES : versions?.files(name, g.configHash);
    const [ca, cb] = await Promise.all([content(a), content(b)]);
    const digests = (g: GenerationRecord, c: ReadonlyMap<string, string> | undefined) =>
      g.configFiles ?? (c ? fileDigests(c) : undefined);
    const da = digests(a, ca);
    const db = digests(b, cb);
    filesKnown = da !== undefined && db !== undefined;
    if (da && db) {
      const texts =
        ca && cb
          ? new Map(
              diffConfigs(new Map(ca), new Map(cb), new Set(secrets), { bothWays: true }).map((d) => [
                d.path,
                d.diff,
              ]),
            )
          : undefined;
      files = fileChanges(da, db, texts);
    }
  }
  return {
    name,
    from: generationView(a),
    to: generationView(b),
    ...(a.image !== b.image ? { image: { from: a.image, to: b.image } } : {}),
    ...(a.imageDigest !== b.imageDigest ? { imageDigest: { from: a.imageDigest, to: b.imageDigest } } : {}),
    spec,
    config: { changed, filesKnown, files },
  };
}

/** Files whose digest differs (or that exist on one side only), by path, with their diff text when known. */
export function fileChanges(
  from: readonly ConfigFileDigest[],
  to: readonly ConfigFileDigest[],
  diffs?: ReadonlyMap<string, string>,
): ConfigFileChangeView[] {
  const a = new Map(from.map((f) => [f.path, f.sha256]));
  const b = new Map(to.map((f) => [f.path, f.sha256]));
  const out: ConfigFileChangeView[] = [];
  for (const path of [...new Set([...a.keys(), ...b.keys()])].sort()) {
    const x = a.get(path) ?? null;
    const y = b.get(path) ?? null;
    if (x === y) continue;
    const diff = diffs?.get(path);
    out.push({
      path,
      change: x === null ? 'added' : y === null ? 'removed' : 'modified',
      fromSha256: x,
      toSha256: y,
      ...(diff !== undefined ? { diff } : {}),
    });
  }
  return out;
}
