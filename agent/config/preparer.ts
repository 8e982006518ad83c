import {
  establishedRunsOnHost,
  hasKollaConfig,
  HEALTHCHECKS_MOUNT,
  type CheckSpec,
  type ContainerSpec,
} from '../model/spec.js';
import type { PreparedExtras, Preparer } from '../executor/ports.js';
import type { ConfigFileDigest } from '../state/store.js';

export { HEALTHCHECKS_MOUNT };

/** True when the check runs one of the shipped scripts inside the container. */
function usesScript(c: CheckSpec, spec: ContainerSpec): boolean {
  if (c.probe.kind === 'established') return !establishedRunsOnHost(spec);
  return c.probe.kind === 'exec' && c.probe.argv.some((a) => a.startsWith(`${HEALTHCHECKS_MOUNT}/`));
}

/** Rendered config for one container: written before a generation is created. */
export interface ConfigPort {
  /** The hash of what rendering this spec would produce; 'none' without config. */
  hash(spec: ContainerSpec): string;
  /** Renders and switches the container's config dir; returns the host dir to mount (and each file's digest). */
  write(spec: ContainerSpec): Promise<{ hostDir: string; hash: string; files?: readonly ConfigFileDigest[] }>;
  /** Points the config back at the version with this hash (rollback); false when it is gone. */
  restore(name: string, configHash: string): Promise<boolean>;
}

export const NO_CONFIG: ConfigPort = {
  hash: () => 'none',
  write: () => Promise.resolve({ hostDir: '', hash: 'none' }),
  restore: () => Promise.resolve(true),
};

export const KOLLA_CONFIG_DIR = '/var/lib/kolla/config_files';

/**
 * What a new generation mounts besides its own definition: the shipped check
 * scripts (read-only, only when one of its checks uses them) and its rendered
 * config (read-only, at kolla's path, with KOLLA_CONFIG_STRATEGY).
 */
export class MountPreparer implements Preparer {
  constructor(
    private readonly healthchecksDir: string,
    private readonly config: ConfigPort,
  ) {}

  async prepare(spec: ContainerSpec): Promise<PreparedExtras> {
    const extraBinds: { source: string; target: string; readOnly: boolean }[] = [];
    const extraEnv: Record<string, string> = {};
    if (spec.healthchecks.some((c) => usesScript(c, spec)))
      extraBinds.push({ source: this.healthchecksDir, target: HEALTHCHECKS_MOUNT, readOnly: true });
    let configHash = 'none';
    let configFiles: readonly ConfigFileDigest[] | undefined;
    if (hasKollaConfig(spec)) {
      const written = await this.config.write(spec);
      configHash = written.hash;
      configFiles = written.files;
      extraBinds.push({ source: written.hostDir, target: KOLLA_CONFIG_DIR, readOnly: true });
      extraEnv.KOLLA_CONFIG_STRATEGY = 'COPY_ALWAYS';
    }
    return { extraBinds, extraEnv, configHash, ...(configFiles ? { configFiles } : {}) };
  }

  restore(name: string, configHash: string): Promise<boolean> {
    if (configHash === 'none') return Promise.resolve(true);
    return this.config.restore(name, configHash);
  }
}
