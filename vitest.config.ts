import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          testTimeout: 10_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // Integration tests share one engine: run files one at a time.
          fileParallelism: false,
          globalSetup: ['test/integration/global-setup.ts'],
        },
      },
      {
        test: {
          // One test per attack on a trust boundary (docs/security.md); `npm run test:security`.
          name: 'security',
          include: ['test/security/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          fileParallelism: false,
          globalSetup: ['test/integration/global-setup.ts'],
        },
      },
      {
        test: {
          // spcd on a real Podman service (docs/how-to/run-on-podman.md): its own tests, and the
          // engine contract tests of the integration lane that hold on Podman unchanged.
          name: 'podman',
          include: [
            'test/podman/**/*.test.ts',
            'test/integration/adopt-kolla-host.test.ts',
            'test/integration/boot-definitions.test.ts',
            'test/integration/health-exec.test.ts',
            'test/integration/lifecycle.test.ts',
            'test/integration/named-volumes.test.ts',
            'test/integration/recovery-quarantine.test.ts',
            'test/integration/recovery-rollback.test.ts',
            'test/integration/upgrade-failpoints.test.ts',
            'test/integration/upgrade-registry.test.ts',
          ],
          // CONTAINERS_CONF: the settings ensure-podman.sh wrote, for the podman command line too.
          env: {
            SPCD_DOCKER_SOCKET: '/run/podman/podman.sock',
            SPCD_ENGINE: 'podman',
            CONTAINERS_CONF: '/run/spcd-podman/containers.conf',
          },
          testTimeout: 120_000,
          hookTimeout: 180_000,
          fileParallelism: false,
          globalSetup: ['test/podman/global-setup.ts'],
        },
      },
      {
        test: {
          // The Debian package under systemd (issue 28): `npm run e2e:install`, which builds the packages first.
          name: 'install',
          include: ['test/install/**/*.test.ts'],
          testTimeout: 600_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
