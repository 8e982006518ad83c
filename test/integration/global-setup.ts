import { execFileSync } from 'node:child_process';

/** Integration tests need a running engine, the demo images and a build of agent/. */
export default function setup(): void {
  const run = (cmd: string, args: string[]): void => {
    execFileSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: process.cwd() });
  };
  run('bash', ['scripts/ensure-docker.sh']);
  run('bash', ['scripts/build-demo-images.sh']);
  run('npx', ['tsc', '-p', 'tsconfig.build.json']);
}
