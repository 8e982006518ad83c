/** spcctl run in-process (runCli) with its output captured, for the CLI's unit tests. */
import { Writable } from 'node:stream';
import { runCli } from '../../agent/cli/main.js';

/** A stream that keeps what is written (a terminal when `isTTY`: the CLI draws progress and colours then). */
export class Capture extends Writable {
  text = '';
  constructor(public isTTY = false) {
    super();
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.text += chunk.toString();
    cb();
  }
}

/**
 * Runs one spcctl command; by default with no spcd socket anywhere (the
 * command must not need spcd). `tty`: stdout is a terminal.
 */
export async function runSpcctl(
  args: string[],
  env: NodeJS.ProcessEnv = { SPCD_SOCKET: '/nonexistent/spcd.sock' },
  opts: { tty?: boolean } = {},
): Promise<{ code: number; out: string; err: string }> {
  const stdout = new Capture(opts.tty ?? false);
  const stderr = new Capture();
  const code = await runCli(args, { stdout, stderr, env });
  return { code, out: stdout.text, err: stderr.text };
}
