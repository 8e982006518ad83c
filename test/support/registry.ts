import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from './daemon.js';
import { docker, ON_PODMAN } from './docker.js';

const SCRIPT = join(REPO, 'scripts', 'registry.sh');

/**
 * The port a test's registry listens on: any free one for Docker (which
 * takes plain HTTP from 127.0.0.0/8), and on Podman the one the lane's
 * registries.conf names insecure (scripts/podman/ensure-podman.sh): Podman
 * pulls over plain HTTP only from a registry listed so. One such registry
 * at a time.
 */
export function engineRegistryPort(): number {
  if (process.env.SPCD_ENGINE !== 'podman') return 0;
  const at = process.env.SPCD_PODMAN_TEST_REGISTRY ?? '127.0.0.1:15055';
  return Number(at.slice(at.lastIndexOf(':') + 1));
}

/**
 * A real local registry (Debian's docker-registry) driven through
 * scripts/registry.sh: its own directory and free port on 127.0.0.1, optional
 * htpasswd auth. Images are pushed as 127.0.0.1:PORT/kolla/demo-service:TAG and
 * the local tag is dropped so the next pull really talks to the registry.
 */
export class LocalRegistry {
  private constructor(
    readonly dir: string,
    readonly port: number,
    readonly auth: { user: string; pass: string } | undefined,
  ) {}

  static start(
    dir: string,
    opts: { auth?: { user: string; pass: string }; port?: number } = {},
  ): LocalRegistry {
    mkdirSync(dir, { recursive: true });
    const want = String(opts.port ?? engineRegistryPort());
    const args = ['start', dir, want, ...(opts.auth ? [opts.auth.user, opts.auth.pass] : [])];
    const port = Number(run(args).trim().split('\n').pop());
    if (!Number.isInteger(port) || port <= 0) throw new Error(`registry.sh start printed no port`);
    return new LocalRegistry(dir, port, opts.auth);
  }

  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  ref(tag: string): string {
    return `${this.host}/kolla/demo-service:${tag}`;
  }

  /** Pushes spcd-demo/service:TAG for each tag. */
  push(...tags: string[]): void {
    run(
      ['push', this.dir, ...tags],
      this.auth ? { REGISTRY_USER: this.auth.user, REGISTRY_PASS: this.auth.pass } : {},
    );
  }

  stop(): void {
    run(['stop', this.dir]);
  }

  /** Starts it again on the same port with the same data. */
  restart(): void {
    const args = [
      'start',
      this.dir,
      String(this.port),
      ...(this.auth ? [this.auth.user, this.auth.pass] : []),
    ];
    run(args);
  }

  /** Writes a docker config.json with these credentials for this registry; returns its path. */
  writeAuthFile(path: string, user: string, pass: string): string {
    const auth = Buffer.from(`${user}:${pass}`).toString('base64');
    writeFileSync(path, JSON.stringify({ auths: { [this.host]: { auth } } }), { mode: 0o600 });
    return path;
  }

  /** Removes every local image tag that points into this registry (the images stay under their spcd-demo tags). */
  async removeLocalTags(): Promise<void> {
    const d = docker();
    const images = await d.listImages({ filters: { reference: [`${this.host}/kolla/demo-service`] } });
    for (const img of images) {
      for (const tag of img.RepoTags ?? []) {
        if (tag.startsWith(`${this.host}/`))
          await d
            .getImage(tag)
            .remove()
            .catch(() => undefined);
      }
      // Podman removes the whole image by a digest, its other tags (spcd-demo/service:N) with it;
      // Docker only that reference. Untagged from this registry, the image has no digest of it left on Podman.
      const keptElsewhere = (img.RepoTags ?? []).some((t) => !t.startsWith(`${this.host}/`));
      if (ON_PODMAN && keptElsewhere) continue;
      for (const dg of img.RepoDigests ?? []) {
        if (dg.startsWith(`${this.host}/`))
          await d
            .getImage(dg)
            .remove()
            .catch(() => undefined);
      }
    }
  }

  /** Drops one tag locally so that the next 'missing' pull fetches it from the registry. */
  async forgetLocally(tag: string): Promise<void> {
    await docker()
      .getImage(this.ref(tag))
      .remove()
      .catch(() => undefined);
  }
}

function run(args: string[], env: Record<string, string> = {}): string {
  return execFileSync('bash', [SCRIPT, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}
