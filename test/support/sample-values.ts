import { chmod, copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allContainers, findSet, hasKollaConfig, type ContainerSpec } from '../../agent/model/spec.js';
import { collectSecretValues, loadValueFile, mergeValues } from '../../agent/render/values.js';
import { loadDesired } from '../../agent/spec/load.js';
import { REPO } from './daemon.js';

export const RENDER_FIXTURES = join(REPO, 'test', 'fixtures', 'render');

/** The sample template values of test/fixtures/render/ (set defaults, globals, host, secrets), merged. */
export async function sampleValues(): Promise<{
  values: Record<string, unknown>;
  secretValues: Set<string>;
}> {
  const tmp = await mkdtemp(join(tmpdir(), 'spcd-sample-values-'));
  try {
    // git does not keep 0600: copy the sample secrets to a file with the mode spcd demands.
    const secretsPath = join(tmp, 'secrets.yaml');
    await copyFile(join(RENDER_FIXTURES, 'secrets.yaml'), secretsPath);
    await chmod(secretsPath, 0o600);
    const secrets = await loadValueFile(secretsPath, { secret: true });
    const merged = mergeValues({
      setDefaults: await loadValueFile(join(RENDER_FIXTURES, 'set-defaults.yaml')),
      globals: await loadValueFile(join(RENDER_FIXTURES, 'globals.yaml')),
      hostValues: await loadValueFile(join(RENDER_FIXTURES, 'host.yaml')),
      secrets,
    });
    return { values: merged.values, secretValues: collectSecretValues(secrets) };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** The shipped compute set (container-sets/compute.yaml) and its containers that get a Kolla config.json. */
export async function shippedCompute(): Promise<{
  defaults: Readonly<Record<string, unknown>> | undefined;
  containers: ContainerSpec[];
}> {
  const desired = await loadDesired({
    setsDir: join(REPO, 'container-sets'),
    checkLibraryFile: join(REPO, 'healthchecks', 'library.yaml'),
  });
  const compute = findSet(desired.sets, 'compute');
  return {
    defaults: compute?.defaults,
    containers: allContainers(compute ? [compute] : []).filter(hasKollaConfig),
  };
}
