/** Command-line parsing: one option table per command, checked strictly. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CliError, EXIT } from './exit.js';

type Options = NonNullable<ParseArgsConfig['options']>;

const GLOBAL: Options = {
  socket: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

const WAIT: Options = { wait: { type: 'boolean' }, timeout: { type: 'string' } };
const EXPECT: Options = { 'expect-generation': { type: 'string' } };

/** Options and the number of positional arguments (NAME, DIR...) of each command. */
export const COMMANDS: Record<string, { options: Options; positionals: number; usage: string }> = {
  status: { options: {}, positionals: 0, usage: 'status' },
  ps: { options: {}, positionals: 0, usage: 'ps' },
  health: { options: {}, positionals: 1, usage: 'health NAME' },
  generations: { options: {}, positionals: 1, usage: 'generations NAME' },
  upgrade: {
    options: { image: { type: 'string' }, ...EXPECT, ...WAIT },
    positionals: 1,
    usage: 'upgrade NAME --image REF [--expect-generation N] [--wait [--timeout S]]',
  },
  rollback: {
    options: { to: { type: 'string' }, force: { type: 'boolean' }, ...WAIT },
    positionals: 1,
    usage: 'rollback NAME [--to N] [--force] [--wait]',
  },
  restart: {
    options: { ...EXPECT, ...WAIT },
    positionals: 1,
    usage: 'restart NAME [--expect-generation N] [--wait]',
  },
  stop: {
    options: { ...EXPECT, ...WAIT },
    positionals: 1,
    usage: 'stop NAME [--expect-generation N] [--wait]',
  },
  start: {
    options: { ...EXPECT, ...WAIT },
    positionals: 1,
    usage: 'start NAME [--expect-generation N] [--wait]',
  },
  logs: {
    options: { follow: { type: 'boolean', short: 'f' }, tail: { type: 'string' } },
    positionals: 1,
    usage: 'logs [-f] [--tail N] NAME',
  },
  events: { options: {}, positionals: 0, usage: 'events' },
  plan: { options: {}, positionals: 0, usage: 'plan' },
  reload: { options: { ...WAIT }, positionals: 0, usage: 'reload [--wait]' },
  validate: {
    options: { overrides: { type: 'string' }, checks: { type: 'string' } },
    positionals: 1,
    usage: 'validate DIR [--overrides FILE] [--checks FILE]',
  },
  version: { options: {}, positionals: 0, usage: 'version' },
  fleet: {
    options: {
      kubeconfig: { type: 'string' },
      namespace: { type: 'string' },
      configmap: { type: 'string' },
      nodes: { type: 'boolean' },
    },
    positionals: 1,
    usage: 'fleet status [--kubeconfig FILE] [--namespace NS] [--configmap NAME] [--nodes]',
  },
};

export function usageText(): string {
  return (
    'usage: spcctl [--socket PATH] [--json] COMMAND [ARGS]\n\ncommands:\n' +
    Object.values(COMMANDS)
      .map((c) => `  ${c.usage}`)
      .join('\n') +
    '\n\nsocket: --socket PATH, else $SPCD_SOCKET, else /run/spcd/spcd.sock\n' +
    'exit codes: 0 ok, 1 operation failed, 2 usage, 3 cannot reach spcd, 4 not found, 5 conflict\n'
  );
}

export interface Parsed {
  readonly command: string;
  readonly positionals: readonly string[];
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
}

export function parse(argv: readonly string[]): Parsed | 'help' {
  // the command is the first word that is not an option or an option's value
  let command: string | undefined;
  let at = -1;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--socket') {
      i++;
      continue;
    }
    if (!a.startsWith('-')) {
      command = a;
      at = i;
      break;
    }
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
  if (parsed.positionals.length !== def.positionals) {
    throw new CliError(`usage: spcctl ${def.usage}`, EXIT.USAGE);
  }
  return { command, positionals: parsed.positionals, values: parsed.values as Parsed['values'] };
}

export function intOption(values: Parsed['values'], name: string, min: number): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^\d+$/.test(v) || Number(v) < min) {
    throw new CliError(`--${name} must be an integer >= ${min}`, EXIT.USAGE);
  }
  return Number(v);
}
