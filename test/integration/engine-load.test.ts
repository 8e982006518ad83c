import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { DOCKER_SOCKET } from '../support/docker.js';

/**
 * agent/engine/load-dockerode.ts defers the modules dockerode requires for
 * transports and builds spcd never uses. Each case runs in a fresh node
 * process (the CommonJS cache is per process) on the built dist/.
 */
const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');

async function inChild(body: string): Promise<Record<string, unknown>> {
  const script = `
    import { createRequire } from 'node:module';
    const { loadDockerode } = await import(${JSON.stringify(`${REPO}/dist/engine/load-dockerode.js`)});
    const here = createRequire(${JSON.stringify(`${REPO}/dist/engine/load-dockerode.js`)});
    const from = (...chain) => chain.reduce((req, pkg) => createRequire(req.resolve(pkg)), here);
    // Real modules carry their lookup paths; the stand-ins carry none.
    const loadedFiles = (pkg) => Object.values(here.cache)
      .filter((m) => m.filename.includes('/node_modules/' + pkg + '/') && m.paths.length > 0).length;
    const out = {};
    ${body}
    console.log(JSON.stringify(out));
  `;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 30_000 });
  return JSON.parse(stdout.trim().split('\n').pop() as string) as Record<string, unknown>;
}

describe('loading dockerode', () => {
  it('talks to the real engine without loading ssh2, gRPC, protobufjs or tar-fs', async () => {
    const out = await inChild(`
      const Docker = loadDockerode();
      const docker = new Docker({ socketPath: ${JSON.stringify(DOCKER_SOCKET)} });
      out.ping = String(await docker.ping());
      out.version = (await docker.version()).ApiVersion;
      for (const pkg of ['ssh2', '@grpc/grpc-js', '@grpc/proto-loader', 'protobufjs', 'tar-fs', 'tar-stream', 'cpu-features'])
        out[pkg] = loadedFiles(pkg);
      out.docker = loadedFiles('dockerode');
    `);
    expect(out.ping).toBe('OK');
    expect(out.version).toMatch(/^1\.\d+$/);
    expect(out.docker).toBeGreaterThan(5);
    for (const pkg of [
      'ssh2',
      '@grpc/grpc-js',
      '@grpc/proto-loader',
      'protobufjs',
      'tar-fs',
      'tar-stream',
      'cpu-features',
    ])
      expect(out[pkg], pkg).toBe(0);
  });

  it('loads each deferred module for real on first use', async () => {
    const out = await inChild(`
      loadDockerode();
      const ssh2 = from('dockerode', 'docker-modem')('ssh2');
      const client = new ssh2.Client();
      out.sshConnect = typeof client.connect;
      out.sshFiles = loadedFiles('ssh2');
      const grpc = from('dockerode')('@grpc/grpc-js');
      out.grpcInsecure = typeof grpc.credentials.createInsecure();
      const protoLoader = from('dockerode')('@grpc/proto-loader');
      out.protoLoadSync = typeof protoLoader.loadSync;
      const tar = from('dockerode')('tar-fs');
      out.tarPack = typeof tar.pack;
      const ignore = from('dockerode')('@balena/dockerignore');
      out.ignores = ignore({ ignorecase: false }).add('*.log').ignores('x.log');
      out.keeps = ignore({ ignorecase: false }).add('*.log').ignores('x.txt');
      out.grpcKeys = Object.keys(grpc).includes('credentials');
    `);
    expect(out).toEqual({
      sshConnect: 'function',
      sshFiles: expect.any(Number),
      grpcInsecure: 'object',
      protoLoadSync: 'function',
      tarPack: 'function',
      ignores: true,
      keeps: false,
      grpcKeys: true,
    });
    expect(out.sshFiles).toBeGreaterThan(5);
  });
});
