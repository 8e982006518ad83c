/**
 * Slow and stuck API clients in a child process (its own event loop, like a
 * real misbehaving tool): `slow` clients send a request head (GET) or a
 * declared body (POST) one byte per second and reconnect one second after
 * they are closed; `stuck` clients open GET /v1/events and never read. The
 * child prints its counts as one JSON line every 200 ms.
 */
import { spawn, type ChildProcess } from 'node:child_process';

const SCRIPT = String.raw`
import { connect } from 'node:net';
const [path, slowText, stuckText] = process.argv.slice(1);
const counts = { slowConnects: 0, slowCloses: 0, slowOpen: 0, stuckOpen: 0, stuckCloses: 0 };
let stopping = false;
function slow(i) {
  const s = connect(path);
  let timer;
  let connected = false;
  s.on('connect', () => {
    connected = true;
    counts.slowConnects++;
    counts.slowOpen++;
    s.write(
      i % 3 === 0
        ? 'POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{'
        : 'GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Slow: ',
    );
    timer = setInterval(() => s.write(' '), 1000);
  });
  s.on('data', () => undefined);
  s.on('error', () => undefined);
  s.on('close', () => {
    clearInterval(timer);
    if (connected) counts.slowOpen--;
    counts.slowCloses++;
    if (!stopping) setTimeout(() => slow(i), 1000);
  });
}
function stuck() {
  const s = connect(path);
  s.on('connect', () => {
    counts.stuckOpen++;
    s.write('GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n');
    s.pause();
  });
  s.on('error', () => undefined);
  s.on('close', () => {
    counts.stuckOpen--;
    counts.stuckCloses++;
  });
}
for (let i = 0; i < Number(stuckText); i++) stuck();
for (let i = 0; i < Number(slowText); i++) slow(i);
setInterval(() => process.stdout.write(JSON.stringify(counts) + '\n'), 200);
process.stdin.on('end', () => { stopping = true; process.exit(0); });
process.stdin.resume();
`;

export interface SlowCounts {
  readonly slowConnects: number;
  readonly slowCloses: number;
  readonly slowOpen: number;
  readonly stuckOpen: number;
  readonly stuckCloses: number;
}

export interface SlowClients {
  /** The child's latest counts (zeros until it reports). */
  counts(): SlowCounts;
  stop(): Promise<void>;
}

export function startSlowClients(socketPath: string, slow: number, stuck: number): SlowClients {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--input-type=module', '-e', SCRIPT, socketPath, String(slow), String(stuck)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  let last: SlowCounts = { slowConnects: 0, slowCloses: 0, slowOpen: 0, stuckOpen: 0, stuckCloses: 0 };
  let buffer = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    const latest = lines.filter((l) => l.trim() !== '').pop();
    if (latest) last = JSON.parse(latest) as SlowCounts;
  });
  return {
    counts: () => last,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) {
          resolve();
          return;
        }
        child.once('exit', () => resolve());
        child.stdin?.end();
        setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
      }),
  };
}
