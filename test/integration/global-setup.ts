import { execFileSync } from 'node:child_process';

/** Integration tests need a running engine, the demo images and a build of agent/. */
export default function setup(): void {
  // A run on Podman (SPCD_ENGINE=podman npm run e2e:libvirt) names Podman's socket: Docker's scripts get Docker's.
  const env =
    process.env.SPCD_ENGINE === 'podman'
      ? { ...process.env, SPCD_DOCKER_SOCKET: '/var/run/docker.sock' }
      : process.env;
  const run = (cmd: string, args: string[]): void => {
    execFileSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: process.cwd(), env });
  };
  run('bash', ['scripts/ensure-docker.sh']);
  run('bash', ['scripts/build-demo-images.sh']);
  // promtool, for metrics-promtool.test.ts and alert-rules.test.ts (no server is started).
  run('bash', ['scripts/ensure-promtool.sh']);
  // etcd (Debian's etcd-server; its service is not started), for etcd-rollout.test.ts.
  run('bash', ['scripts/ensure-etcd.sh']);
  // Kolla's runtime (set_configs.py, kolla_start) from ../shared, for kolla-set-configs.test.ts
  // and kolla-bootstrap.test.ts. Cached by input hash; cold about 1.5-4 minutes (debootstrap),
  // printed by the script. A failure is reported here and by those tests, not by every test.
  try {
    run('bash', ['scripts/kolla-runtime/build-image.sh']);
  } catch (err) {
    console.error(`global setup: scripts/kolla-runtime/build-image.sh failed: ${(err as Error).message}`);
  }
  run('npx', ['tsc', '-p', 'tsconfig.build.json']);
}
