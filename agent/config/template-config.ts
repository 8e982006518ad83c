import type { Logger } from '../log.js';
import { sha256Hex, specHash } from '../model/hash.js';
import { hasKollaConfig, type ContainerSpec, type DesiredState, type SetSpec } from '../model/spec.js';
import { Renderer, type RenderedConfig } from '../render/renderer.js';
import { collectSecretValues, loadValueFile, mergeValues } from '../render/values.js';
import {
  configDirPath,
  readConfigVersion,
  readCurrentConfig,
  restoreConfigVersion,
  writeConfigDir,
} from '../render/writer.js';
import { diffConfigs, type FileDiff } from '../render/diff.js';
import { renderedFileMap } from '../render/renderer.js';
import type { ConfigFileDigest } from '../state/store.js';
import type { ConfigPort } from './preparer.js';
import { assertTrusted } from '../spec/trusted-paths.js';

export interface ValueFiles {
  readonly globalsFile: string | undefined;
  readonly secretsFile: string | undefined;
}

/**
 * Config for each container, rendered from the templates with values in
 * increasing precedence: the set's defaults (outer sets under inner), the
 * operator's globals file, the desired ConfigMap's globals (in a cluster),
 * the per-host override values, the secrets file.
 * Rendering is pure and cached per spec; write() switches the container's
 * config directory atomically before a generation that mounts it is created.
 */
export class TemplateConfig implements ConfigPort {
  private readonly renderer: Renderer;
  private defaultsOf = new Map<string, Record<string, unknown>>();
  private globals: Record<string, unknown> = {};
  private hostValues: Record<string, unknown> = {};
  private secrets: Record<string, unknown> = {};
  private secretValues = new Set<string>();
  private cache = new Map<string, RenderedConfig>();

  constructor(
    private readonly opts: { templatesDir: string; configRoot: string; files: ValueFiles; log: Logger },
  ) {
    this.renderer = new Renderer({ templatesDir: opts.templatesDir, log: opts.log });
  }

  /**
   * Re-reads the value files for a new set of definitions. `clusterGlobals`
   * (the desired ConfigMap's globals) lie over the globals file and under the
   * host overrides. Throws (typed) on any bad input.
   */
  async load(definitions: DesiredState, clusterGlobals: Record<string, unknown> = {}): Promise<void> {
    // The resolved paths checked are the paths read (docs/explanation/security.md, "Trusted paths").
    const globalsFile = await trusted(this.opts.files.globalsFile, 'globals file', 'file');
    const secretsFile = await trusted(this.opts.files.secretsFile, 'secrets file', 'secret');
    const fileGlobals = globalsFile ? await loadValueFile(globalsFile, { optional: true }) : {};
    const globals = mergeValues({
      setDefaults: fileGlobals,
      globals: clusterGlobals,
      hostValues: {},
      secrets: {},
    }).values;
    const secrets = secretsFile ? await loadValueFile(secretsFile, { secret: true, optional: true }) : {};
    const defaultsOf = new Map<string, Record<string, unknown>>();
    const walk = (s: SetSpec, inherited: Record<string, unknown>): void => {
      const merged = mergeValues({
        setDefaults: inherited,
        globals: { ...s.defaults },
        hostValues: {},
        secrets: {},
      }).values;
      for (const c of s.containers) defaultsOf.set(c.name, merged);
      for (const sub of s.sets) walk(sub, merged);
    };
    for (const s of definitions.sets) walk(s, {});
    this.globals = globals;
    this.secrets = secrets;
    this.secretValues = collectSecretValues(secrets);
    this.hostValues = { ...(definitions.hostValues ?? {}) };
    this.defaultsOf = defaultsOf;
    this.cache = new Map();
  }

  /** Secret values, for masking diffs. */
  secretSet(): Set<string> {
    return this.secretValues;
  }

  render(spec: ContainerSpec): RenderedConfig {
    const key = specHash(spec);
    const hit = this.cache.get(key);
    if (hit) return hit;
    const { values } = mergeValues({
      setDefaults: this.defaultsOf.get(spec.name) ?? {},
      globals: this.globals,
      hostValues: this.hostValues,
      secrets: this.secrets,
    });
    const rendered = this.renderer.renderContainer(spec, values, this.secretValues);
    this.cache.set(key, rendered);
    return rendered;
  }

  hash(spec: ContainerSpec): string {
    return !hasKollaConfig(spec) ? 'none' : this.render(spec).hash;
  }

  async write(spec: ContainerSpec): Promise<{ hostDir: string; hash: string; files: ConfigFileDigest[] }> {
    const rendered = this.render(spec);
    await writeConfigDir(this.opts.configRoot, spec.name, rendered, { log: this.opts.log });
    return {
      hostDir: configDirPath(this.opts.configRoot, spec.name),
      hash: rendered.hash,
      files: fileDigests(renderedFileMap(rendered)),
    };
  }

  /** The files of the kept version rendered with this hash (see readConfigVersion), or undefined. */
  versionFiles(name: string, configHash: string): Promise<Map<string, string> | undefined> {
    return readConfigVersion(this.opts.configRoot, name, configHash);
  }

  /** What rendering this spec would change on disk, secrets masked (for `spcctl plan`). */
  async diff(spec: ContainerSpec): Promise<FileDiff[]> {
    if (!hasKollaConfig(spec)) return [];
    const current = await readCurrentConfig(this.opts.configRoot, spec.name);
    return diffConfigs(current, renderedFileMap(this.render(spec)), this.secretValues);
  }

  /** A fresh instance over the same directories, for previews that must not touch this one. */
  fork(): TemplateConfig {
    return new TemplateConfig(this.opts);
  }

  restore(name: string, configHash: string): Promise<boolean> {
    return restoreConfigVersion(this.opts.configRoot, name, configHash, { log: this.opts.log });
  }
}

/** A value file's resolved path once its owner, mode and folders are trusted; undefined when not named or missing. */
async function trusted(
  file: string | undefined,
  what: string,
  kind: 'file' | 'secret',
): Promise<string | undefined> {
  return file === undefined ? undefined : assertTrusted(file, what, kind, { optional: true });
}

/** Each file's path and the sha256 of its content, by path: what a generation records of its config. */
export function fileDigests(files: ReadonlyMap<string, string>): ConfigFileDigest[] {
  return [...files]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([path, content]) => ({ path, sha256: sha256Hex(content) }));
}
