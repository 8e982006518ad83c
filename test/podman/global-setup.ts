import { execFileSync } from 'node:child_process';

/**
 * The Podman lane needs Docker (the demo images are built there), Podman's
 * API service, the demo images copied into Podman, and a build of agent/.
 */
export default function setup(): void {
  // The lane's own SPCD_DOCKER_SOCKET names Podman's socket: Docker's scripts get Docker's.
  const env = { ...process.env, SPCD_DOCKER_SOCKET: '/var/run/docker.sock' };
  const run = (cmd: string, args: string[]): void => {
    execFileSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: process.cwd(), env });
  };
  run('bash', ['scripts/ensure-docker.sh']);
  run('bash', ['scripts/build-demo-images.sh']);
  run('bash', ['scripts/podman/ensure-podman.sh']);
  const tags = ['1', '2', '3', 'crash', 'unhealthy', 'hang'];
  run('bash', ['scripts/podman/load-images.sh', ...tags.map((t) => `spcd-demo/service:${t}`)]);
  // Kolla's runtime image (cached by input hash), for the kolla-ansible Podman host of adopt-kolla-host.
  run('bash', ['scripts/kolla-runtime/build-image.sh']);
  run('npx', ['tsc', '-p', 'tsconfig.build.json']);
}
