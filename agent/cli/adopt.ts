/**
 * `spcctl adopt`: scan writes a container set that reproduces the running
 * containers without spcd labels (for the operator to review and keep),
 * apply is the operator's word that adopts one, release gives one back.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AdoptScan } from '../api/types.js';
import type { ApiClient } from './client.js';
import { CliError, EXIT, type ExitCode } from './exit.js';
import { toYaml } from './output.js';

export interface AdoptContext {
  readonly args: {
    readonly positionals: readonly string[];
    readonly values: Readonly<Record<string, unknown>>;
  };
  readonly json: boolean;
  readonly client: () => ApiClient;
  readonly print: (text: string) => void;
  /** Starts the long operation (and follows it with --wait). */
  readonly operation: (path: string, body: Record<string, unknown>) => Promise<ExitCode>;
}

const KOLLA_CONFIG = '/var/lib/kolla/config_files';

/** The command Kolla's config.json under a bound config folder names, when it can be read here. */
function kollaCommand(definition: Readonly<Record<string, unknown>>): string | undefined {
  const binds = Array.isArray(definition.binds) ? (definition.binds as string[]) : [];
  const bind = binds.find((b) => b.split(':')[1]?.replace(/\/+$/, '') === KOLLA_CONFIG);
  const dir = bind?.split(':')[0];
  if (!dir?.startsWith('/')) return undefined;
  try {
    const parsed = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as { command?: unknown };
    return typeof parsed.command === 'string'
      ? `${join(dir, 'config.json')} runs: ${parsed.command}`
      : undefined;
  } catch {
    return `${join(dir, 'config.json')} could not be read here`;
  }
}

/** The container-set file of the scan: the running containers, each key as the engine holds it. */
export function scanYaml(set: string, scan: AdoptScan, only?: readonly string[]): string {
  const picked = scan.containers.filter((c) => !only || only.includes(c.name));
  const lines = [
    '# Written by `spcctl adopt scan` from the running containers without spcd labels.',
    "# Each entry reproduces its container as the engine holds it (the image's own",
    '# environment left out). Review it, keep it with the other sets, reload, and read',
    '# `spcctl plan`: a container is adopted only while nothing differs.',
    '# Health checks are not read from the containers: add spcd checks (healthchecks',
    '# are not hashed, so adding them later replaces nothing).',
  ];
  for (const c of picked) {
    const note = kollaCommand(c.definition);
    if (note) lines.push(`# ${c.name}: ${note}`);
  }
  const containers = Object.fromEntries(picked.map((c) => [c.name, c.definition]));
  return `${lines.join('\n')}\n${toYaml({ set, description: 'adopted containers', containers })}`;
}

export async function adopt(ctx: AdoptContext): Promise<ExitCode> {
  const [verb, operand] = ctx.args.positionals as [string, string];
  const enc = encodeURIComponent;
  switch (verb) {
    case 'scan': {
      const { body } = await ctx.client().call<AdoptScan>('GET', '/v1/adopt/scan');
      const only = typeof ctx.args.values.only === 'string' ? ctx.args.values.only.split(',') : undefined;
      ctx.print(ctx.json ? JSON.stringify(body, null, 2) + '\n' : scanYaml(operand, body, only));
      return EXIT.OK;
    }
    case 'apply':
      return ctx.operation(`/v1/containers/${enc(operand)}/adopt`, {});
    case 'release':
      return ctx.operation(`/v1/containers/${enc(operand)}/release`, {});
    default:
      throw new CliError(`adopt: unknown verb ${JSON.stringify(verb)} (scan, apply, release)`, EXIT.USAGE);
  }
}
