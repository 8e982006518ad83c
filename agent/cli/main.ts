/** spcctl: the operator's client of spcd's unix-socket API. */
import type { Writable } from 'node:stream';
import { parse, usageText } from './args.js';
import { ApiClient, DEFAULT_SOCKET } from './client.js';
import { COMMAND_TABLE, type CommandContext } from './commands.js';
import { CliError, EXIT } from './exit.js';
import { escapeControl } from '../model/text.js';
import { defaultReadOnlySocket } from '../model/sockets.js';

export { EXIT } from './exit.js';

export interface CliStreams {
  readonly stdout: Writable & { isTTY?: boolean };
  readonly stderr: Writable;
  readonly env: NodeJS.ProcessEnv;
}

/** Runs one command; resolves with the exit code (docs/reference/api.md, "spcctl exit codes"). Never throws. */
export async function runCli(argv: string[], io: CliStreams): Promise<number> {
  const out = { write: (t: string) => io.stdout.write(t), isTTY: io.stdout.isTTY === true };
  const err = { write: (t: string) => io.stderr.write(t) };
  try {
    const parsed = parse(argv);
    if (parsed === 'help') {
      out.write(usageText());
      return EXIT.OK;
    }
    const socketOpt = parsed.values.socket;
    const socketPath = typeof socketOpt === 'string' ? socketOpt : io.env.SPCD_SOCKET || DEFAULT_SOCKET;
    const readOnlyOpt = parsed.values['readonly-socket'];
    const readOnly = {
      path:
        typeof readOnlyOpt === 'string'
          ? readOnlyOpt
          : io.env.SPCD_READONLY_SOCKET || defaultReadOnlySocket(socketPath),
      only: parsed.values['read-only'] === true,
    };
    let client: ApiClient | null = null;
    const ctx: CommandContext = {
      args: parsed,
      io: { stdout: out, stderr: err },
      json: parsed.output === 'json',
      client: () => (client ??= new ApiClient(socketPath, undefined, readOnly)),
      env: io.env,
    };
    const command = COMMAND_TABLE[parsed.command];
    if (!command) throw new CliError(`unknown command: ${parsed.command}`, EXIT.USAGE);
    return await command(ctx);
  } catch (e) {
    if (e instanceof CliError) {
      err.write(`spcctl: ${escapeControl(e.message)}\n`);
      return e.exitCode;
    }
    err.write(`spcctl: ${escapeControl(e instanceof Error ? e.message : String(e))}\n`);
    return EXIT.FAILED;
  }
}
