/** Command-line parsing: one option table per command, checked strictly. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ETCD_FLAGS, KUBE_FLAGS, type EnvFlag } from '../model/flags.js';
import { CliError, EXIT } from './exit.js';

type Options = NonNullable<ParseArgsConfig['options']>;

export const GLOBAL: Options = {
  socket: { type: 'string' },
  'readonly-socket': { type: 'string' },
  'read-only': { type: 'boolean' },
  json: { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  help: { type: 'boolean', short: 'h' },
};

/** The forms `--output`/`-o` takes (kubectl's): the API's JSON, the same as YAML, or a table with more columns. */
export const OUTPUT_FORMATS = ['json', 'yaml', 'wide'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number] | 'table';
const DATA: readonly OutputFormat[] = ['json', 'yaml'];
const LISTING: readonly OutputFormat[] = ['json', 'yaml', 'wide'];

/** Options from one of spcd's flag tables (the same names and kinds as spcd's). */
const optionsOf = (table: Readonly<Record<string, EnvFlag>>): Options =>
  Object.fromEntries(
    Object.entries(table).map(([k, d]) => [
      k,
      { type: d.boolean ? ('boolean' as const) : ('string' as const) },
    ]),
  );

const WAIT: Options = { wait: { type: 'boolean' }, timeout: { type: 'string' } };
const EXPECT: Options = { 'expect-generation': { type: 'string' } };

export interface CommandDef {
  readonly options: Options;
  /** How many positional arguments (NAME, DIR...) it takes; a function when an option changes that. */
  readonly positionals: number | ((values: Parsed['values']) => number);
  readonly usage: string;
  /** The `--output` forms it prints besides its table; absent: json only (as --json). */
  readonly outputs?: readonly OutputFormat[];
  /** What its first positional argument is, for shell completion: a container, a directory, or one of these words. */
  readonly operand?: 'container' | 'dir' | readonly string[];
  /** Not listed in the usage text (the completion scripts' helper). */
  readonly hidden?: boolean;
}

/** The one table of commands: parsing, usage text and the shell completion scripts are made from it. */
export const COMMANDS: Record<string, CommandDef> = {
  status: { options: {}, positionals: 0, usage: 'status [-o json|yaml|wide]', outputs: LISTING },
  ps: { options: {}, positionals: 0, usage: 'ps [-o json|yaml|wide]', outputs: LISTING },
  health: {
    options: {},
    positionals: 1,
    usage: 'health NAME [-o json|yaml]',
    outputs: DATA,
    operand: 'container',
  },
  generations: {
    options: { diff: { type: 'boolean' } },
    positionals: (v) => (v.diff ? 3 : 1),
    usage: 'generations NAME [--diff A B] [-o json|yaml|wide]',
    outputs: LISTING,
    operand: 'container',
  },
  upgrade: {
    options: { image: { type: 'string' }, ...EXPECT, ...WAIT },
    positionals: 1,
    operand: 'container',
    usage: 'upgrade NAME --image REF [--expect-generation N] [--wait [--timeout S]]',
  },
  rollback: {
    options: { to: { type: 'string' }, force: { type: 'boolean' }, ...WAIT },
    positionals: 1,
    operand: 'container',
    usage: 'rollback NAME [--to N] [--force] [--wait]',
  },
  restart: {
    options: { ...EXPECT, ...WAIT },
    positionals: 1,
    operand: 'container',
    usage: 'restart NAME [--expect-generation N] [--wait]',
  },
  stop: {
    options: { ...EXPECT, ...WAIT },
    positionals: 1,
    operand: 'container',
    usage: 'stop NAME [--expect-generation N] [--wait]',
  },
  start: {
    options: { ...EXPECT, ...WAIT },
    positionals: 1,
    operand: 'container',
    usage: 'start NAME [--expect-generation N] [--wait]',
  },
  adopt: {
    options: { only: { type: 'string' }, ...WAIT },
    positionals: 2,
    usage: 'adopt scan SET [--only NAME,...] | adopt apply NAME [--wait] | adopt release NAME',
    operand: ['scan', 'apply', 'release'],
  },
  logs: {
    options: { follow: { type: 'boolean', short: 'f' }, tail: { type: 'string' }, raw: { type: 'boolean' } },
    positionals: 1,
    operand: 'container',
    usage: 'logs [-f] [--tail N] [--raw] NAME',
    outputs: [],
  },
  events: { options: {}, positionals: 0, usage: 'events [-o json|yaml]', outputs: DATA },
  plan: { options: {}, positionals: 0, usage: 'plan [-o json|yaml]', outputs: DATA },
  reload: { options: { ...WAIT }, positionals: 0, usage: 'reload [--wait]' },
  validate: {
    options: {
      overrides: { type: 'string' },
      checks: { type: 'string' },
      templates: { type: 'string' },
      globals: { type: 'string' },
      secrets: { type: 'string' },
    },
    positionals: 1,
    usage: 'validate DIR [--overrides FILE] [--checks FILE] [--templates DIR --globals FILE --secrets FILE]',
    operand: 'dir',
  },
  schema: {
    options: { overrides: { type: 'boolean' } },
    positionals: 0,
    usage: 'schema [--overrides]',
  },
  version: { options: {}, positionals: 0, usage: 'version' },
  completion: {
    options: {},
    positionals: 1,
    usage: 'completion bash|zsh',
    outputs: [],
    operand: ['bash', 'zsh'],
  },
  __complete: {
    options: {},
    positionals: 1,
    usage: '__complete containers',
    outputs: [],
    operand: ['containers'],
    hidden: true,
  },
  fleet: {
    options: {
      kubeconfig: { type: 'string' },
      namespace: { type: 'string' },
      configmap: { type: 'string' },
      nodes: { type: 'boolean' },
      ...optionsOf(KUBE_FLAGS),
      // spcd's own etcd flags (agent/model/flags.ts): the fleet of hosts without Kubernetes
      ...optionsOf(ETCD_FLAGS),
    },
    positionals: 1,
    usage:
      'fleet status [--kubeconfig FILE] [--namespace NS] [--configmap NAME] [--kube-insecure] | [--etcd-endpoints URL,... [--etcd-prefix P] [--etcd-ca FILE --etcd-cert FILE --etcd-key FILE] [--etcd-user U --etcd-password-file FILE] [--etcd-insecure]] [--nodes] [-o json]',
    operand: ['status'],
  },
};

export function usageText(): string {
  return (
    'usage: spcctl [--socket PATH] [--read-only] [-o|--output json|yaml|wide] COMMAND [ARGS]\n\ncommands:\n' +
    Object.values(COMMANDS)
      .filter((c) => !c.hidden)
      .map((c) => `  ${c.usage}`)
      .join('\n') +
    '\n\nsocket: --socket PATH, else $SPCD_SOCKET, else /run/spcd/spcd.sock\n' +
    'read-only socket: --readonly-socket PATH, else $SPCD_READONLY_SOCKET, else the socket\'s directory + "-ro";\n' +
    '  reads go there when the socket refuses spcctl (EACCES), every request with --read-only\n' +
    'exit codes: 0 ok, 1 operation failed, 2 usage, 3 cannot reach spcd, 4 not found, 5 conflict\n'
  );
}

export interface Parsed {
  readonly command: string;
  readonly positionals: readonly string[];
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  /** From --output/-o (--json is -o json); 'table' when neither is given. */
  readonly output: OutputFormat;
}

export function parse(argv: readonly string[]): Parsed | 'help' {
  // the command is the first word that is not an option or an option's value
  let command: string | undefined;
  let at = -1;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--socket' || a === '--readonly-socket' || a === '--output' || a === '-o') {
      i++;
      continue;
    }
    if (!a.startsWith('-')) {
      command = a;
      at = i;
      break;
    }
  }
  // `spcctl --version` is `spcctl version` (as `spcd --version`)
  if (command === undefined && argv.includes('--version')) {
    return parse(['version', ...argv.filter((a) => a !== '--version')]);
  }
  if (command === undefined) {
    if (argv.includes('--help') || argv.includes('-h')) return 'help';
    throw new CliError('no command given\n' + usageText(), EXIT.USAGE);
  }
  if (command === 'help') return 'help';
  const def = COMMANDS[command];
  if (!def) throw new CliError(`unknown command: ${command}\n` + usageText(), EXIT.USAGE);
  let parsed;
  try {
    parsed = parseArgs({
      args: argv.filter((_a, i) => i !== at),
      options: { ...GLOBAL, ...def.options },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new CliError(`${(err as Error).message}\nusage: spcctl ${def.usage}`, EXIT.USAGE);
  }
  if (parsed.values.help) return 'help';
  const values = parsed.values as Parsed['values'];
  const want = typeof def.positionals === 'number' ? def.positionals : def.positionals(values);
  if (parsed.positionals.length !== want) {
    throw new CliError(`usage: spcctl ${def.usage}`, EXIT.USAGE);
  }
  return { command, positionals: parsed.positionals, values, output: outputOf(command, def, values) };
}

/** The output form asked for, checked against what the command prints; the error names the flag. */
function outputOf(command: string, def: CommandDef, values: Parsed['values']): OutputFormat {
  const o = values.output;
  if (o === undefined) return values.json ? 'json' : 'table';
  const known = OUTPUT_FORMATS as readonly string[];
  if (typeof o !== 'string' || !known.includes(o)) {
    throw new CliError(
      `--output: unknown format ${JSON.stringify(o)} (expected one of: ${OUTPUT_FORMATS.join(', ')})`,
      EXIT.USAGE,
    );
  }
  const form = o as OutputFormat;
  const allowed = def.outputs ?? ['json'];
  if (!allowed.includes(form)) {
    throw new CliError(
      allowed.length === 0
        ? `--output: ${command} has no other output form`
        : `--output: ${command} does not print ${form} (it prints: ${allowed.join(', ')})`,
      EXIT.USAGE,
    );
  }
  if (values.json && form !== 'json') throw new CliError(`--json and --output ${form} disagree`, EXIT.USAGE);
  return form;
}

export function intOption(
  values: Parsed['values'],
  name: string,
  min: number,
  label = `--${name}`,
): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^\d+$/.test(v) || Number(v) < min || !Number.isSafeInteger(Number(v))) {
    throw new CliError(`${label} must be an integer >= ${min}, not ${JSON.stringify(v)}`, EXIT.USAGE);
  }
  return Number(v);
}
