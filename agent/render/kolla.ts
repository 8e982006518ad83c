import { SpcdError } from '../errors.js';
import type { ContainerSpec, KollaPermission } from '../model/spec.js';

/**
 * Kolla's config.json. Kolla images start with `kolla_start`, which runs
 * `kolla_set_configs` (docker/base/set_configs.py in openstack/kolla): it
 * reads /var/lib/kolla/config_files/config.json, copies each config_files
 * entry from `source` to `dest` with `owner` ("user" or "user:group") and
 * `perm`, applies `permissions`, and writes `command` to /run_command.
 * kolla_start then runs `exec $CMD` unquoted: the shell splits the command on
 * white space and expands globs, so an argument holding either cannot be
 * expressed and is refused here.
 *
 * `perm` is always four octal digits: set_configs turns "0600" into 0o600,
 * but a three-digit "600" would reach Python's int(x, 0) as decimal 600.
 */

export const KOLLA_CONFIG_DIR = '/var/lib/kolla/config_files';
export const CONFIG_JSON = 'config.json';

const OWNER = /^[a-zA-Z_][a-zA-Z0-9_.-]{0,31}(:[a-zA-Z_][a-zA-Z0-9_.-]{0,31})?$/;
const MODE = /^0?[0-7]{3}$/;
const UNSAFE_ARG = /[\s*?[\]'"\\$`]/;

export interface KollaFile {
  readonly dest: string;
  readonly containerPath: string;
  readonly owner: string;
  readonly mode: string;
  readonly optional?: boolean;
  readonly merge?: boolean;
  readonly preserveProperties?: boolean;
}

export function normalizeOwner(owner: string, container: string): string {
  if (!OWNER.test(owner)) {
    throw new SpcdError(
      'TEMPLATE_INVALID',
      `container ${container}: owner ${JSON.stringify(owner)} is not "user" or "user:group"`,
      {
        container,
        owner,
      },
    );
  }
  return owner;
}

export function normalizeMode(mode: string, container: string): string {
  if (!MODE.test(mode)) {
    throw new SpcdError(
      'TEMPLATE_INVALID',
      `container ${container}: mode ${JSON.stringify(mode)} is not octal like "0600"`,
      {
        container,
        mode,
      },
    );
  }
  return mode.length === 3 ? `0${mode}` : mode;
}

/** The command line kolla_start will run, or a TEMPLATE_INVALID naming the bad argument. */
export function kollaCommand(spec: Pick<ContainerSpec, 'name' | 'command'>): string {
  const argv = spec.command ?? [];
  if (argv.length === 0) {
    throw new SpcdError(
      'TEMPLATE_INVALID',
      `container ${spec.name}: a container with config files needs a command for kolla's config.json`,
      { container: spec.name },
    );
  }
  argv.forEach((arg, i) => {
    if (arg.length === 0 || UNSAFE_ARG.test(arg)) {
      throw new SpcdError(
        'TEMPLATE_INVALID',
        `container ${spec.name}: command argument ${i} (${JSON.stringify(arg)}) is empty or holds white space, quotes or glob characters, which kolla_start's unquoted exec would split or expand`,
        { container: spec.name, argument: i },
      );
    }
  });
  return argv.join(' ');
}

/**
 * config.json text: 2-space indent (prettier-stable, so fixtures stay byte-exact), trailing newline.
 * Keys in Kolla's order; a flag is written only when true, as kolla-ansible's templates do; with
 * preserve_properties set_configs copies the source's owner and mode, so owner and perm are left out.
 */
export function buildKollaConfigJson(
  spec: Pick<ContainerSpec, 'name' | 'command' | 'permissions'>,
  files: readonly KollaFile[],
): string {
  const doc = {
    command: kollaCommand(spec),
    config_files: files.map((f) => ({
      source: `${KOLLA_CONFIG_DIR}/${f.dest}`,
      dest: f.containerPath,
      ...(f.preserveProperties ? {} : { owner: f.owner, perm: f.mode }),
      ...(f.optional ? { optional: true } : {}),
      ...(f.merge ? { merge: true } : {}),
      ...(f.preserveProperties ? { preserve_properties: true } : {}),
    })),
    permissions: (spec.permissions ?? []).map((p) => kollaPermission(p, spec.name)),
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

function kollaPermission(p: KollaPermission, container: string): Record<string, unknown> {
  return {
    path: p.path,
    owner: normalizeOwner(p.owner, container),
    ...(p.perm !== undefined ? { perm: normalizeMode(p.perm, container) } : {}),
    ...(p.recurse ? { recurse: true } : {}),
  };
}
