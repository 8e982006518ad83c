import { rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { DOCKER_SOCKET } from './docker.js';

/**
 * The engine's socket goes away for a while: spcd talks to dockerd through a
 * unix-socket proxy the test can cut (connections reset, new ones refused)
 * and restore, without disturbing the shared dockerd.
 */
export class SocketProxy {
  private server: Server | undefined;
  private readonly conns = new Set<Socket>();
  constructor(readonly path: string) {}

  async up(): Promise<void> {
    rmSync(this.path, { force: true });
    this.server = createServer((client) => {
      const upstream = connect(DOCKER_SOCKET);
      this.conns.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      const drop = (): void => {
        client.destroy();
        upstream.destroy();
        this.conns.delete(client);
        this.conns.delete(upstream);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
    });
    await new Promise<void>((r) => this.server!.listen(this.path, r));
  }

  async down(): Promise<void> {
    for (const c of this.conns) c.destroy();
    this.conns.clear();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    this.server = undefined;
    rmSync(this.path, { force: true });
  }
}
