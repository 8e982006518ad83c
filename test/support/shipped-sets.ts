import { allContainers, type ContainerSpec } from '../../agent/model/spec.js';
import { loadDesired, type LoadOptions } from '../../agent/spec/load.js';
import { LIBRARY_FILE } from '../fixtures/spec/helpers.js';

/**
 * The shipped and fixture sets, as spcd loads them. container-sets-e2e/openstack/
 * is a subdirectory, so it is not read here.
 */
export const REPO_ROOT = new URL('../../', import.meta.url).pathname;

export const SHIPPED_LOADS: Record<string, Omit<LoadOptions, 'checkLibraryFile'>> = {
  compute: { setsDir: `${REPO_ROOT}container-sets` },
  linuxbridge: { setsDir: `${REPO_ROOT}container-sets/linuxbridge` },
  demo: { setsDir: `${REPO_ROOT}container-sets/demo` },
  'demo+no-privileged': {
    setsDir: `${REPO_ROOT}container-sets/demo`,
    overridesFile: `${REPO_ROOT}container-sets/hosts/no-privileged.yaml`,
  },
  e2e: { setsDir: `${REPO_ROOT}container-sets-e2e` },
  fixtures: { setsDir: `${REPO_ROOT}test/fixtures/spec/good` },
};

export async function loadContainers(opts: Omit<LoadOptions, 'checkLibraryFile'>): Promise<ContainerSpec[]> {
  const desired = await loadDesired({ ...opts, checkLibraryFile: LIBRARY_FILE });
  return allContainers(desired.sets);
}
