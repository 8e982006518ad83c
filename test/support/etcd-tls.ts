/**
 * A one-member etcd (Debian's etcd-server, scripts/ensure-etcd.sh) serving
 * clients over TLS on a loopback port and requiring a client certificate
 * (`--client-cert-auth`), as docs/explanation/security.md ("etcd") asks; its
 * health on a plain metrics port. The certificates come from `openssl`: a
 * CA, a server certificate for the names given, client certificates; files
 * in a 0700 folder, keys 0600, as spcd and spcctl require of them.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './etcd-cluster.js';
import { waitFor } from './wait.js';

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A certificate and its key, as PEM files. */
export interface CertFiles {
  readonly cert: string;
  readonly key: string;
}

/** A CA that signs server and client certificates in `dir`. */
export class TestCa {
  readonly cert: string;
  private readonly key: string;
  private serial = 1;

  constructor(
    readonly dir: string,
    readonly name: string,
  ) {
    this.cert = join(dir, `${name}-ca.pem`);
    this.key = join(dir, `${name}-ca-key.pem`);
    openssl(['req', '-x509', ...EC, '-subj', `/CN=${name} test CA`, '-days', '1'], this.key, this.cert);
    chmodSync(this.cert, 0o644);
  }

  /** A certificate for `cn`, with these subjectAltNames (`IP:127.0.0.1`, `DNS:x`) when given. */
  issue(cn: string, sans: readonly string[] = []): CertFiles {
    const base = join(this.dir, `${this.name}-${cn}`);
    const csr = `${base}.csr`;
    openssl(['req', '-new', ...EC, '-subj', `/CN=${cn}`], `${base}-key.pem`, csr);
    const ext = `${base}.ext`;
    writeFileSync(
      ext,
      sans.length > 0 ? `subjectAltName=${sans.join(',')}\n` : 'basicConstraints=CA:FALSE\n',
    );
    const sign = ['x509', '-req', '-in', csr, '-CA', this.cert, '-CAkey', this.key]
      .concat(['-set_serial', String(++this.serial), '-days', '1'])
      .concat(['-extfile', ext, '-out', `${base}.pem`]);
    execFileSync('openssl', sign, { stdio: 'ignore' });
    chmodSync(`${base}.pem`, 0o644);
    return { cert: `${base}.pem`, key: `${base}-key.pem` };
  }
}

function openssl(args: readonly string[], keyOut: string, out: string): void {
  execFileSync('openssl', [...args, '-keyout', keyOut, '-out', out], { stdio: 'ignore' });
  chmodSync(keyOut, 0o600);
}

/** One etcd member over TLS with client certificates required. */
export class TlsEtcd {
  private constructor(
    readonly endpoint: string,
    private readonly proc: ChildProcess,
    private readonly root: string,
    private readonly logFile: string,
  ) {}

  /** Starts it with this server certificate, trusting client certificates of `clientCa`. */
  static async start(server: CertFiles, clientCa: string): Promise<TlsEtcd> {
    const root = mkdtempSync(join(tmpdir(), 'spcd-etcd-tls-'));
    const [client, peer, metrics] = [await freePort(), await freePort(), await freePort()];
    const endpoint = `https://127.0.0.1:${client}`;
    const logFile = join(root, 'etcd.log');
    const log = openSync(logFile, 'a');
    const proc = spawn(
      'etcd',
      ['--name', 'tls', '--data-dir', join(root, 'data')]
        .concat(['--listen-client-urls', endpoint, '--advertise-client-urls', endpoint])
        .concat(['--listen-peer-urls', `http://127.0.0.1:${peer}`])
        .concat(['--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`])
        .concat(['--initial-cluster', `tls=http://127.0.0.1:${peer}`])
        .concat(['--listen-metrics-urls', `http://127.0.0.1:${metrics}`])
        .concat(['--cert-file', server.cert, '--key-file', server.key])
        .concat(['--client-cert-auth', '--trusted-ca-file', clientCa])
        .concat(['--logger', 'zap', '--log-outputs', 'stderr']),
      { stdio: ['ignore', log, log] },
    );
    closeSync(log);
    const etcd = new TlsEtcd(endpoint, proc, root, logFile);
    await waitFor(
      'etcd over TLS healthy',
      async () => {
        const res = await fetch(`http://127.0.0.1:${metrics}/health`).catch(() => undefined);
        return res?.ok && ((await res.json()) as { health?: string }).health === 'true';
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\n${etcd.log()}`);
    });
    return etcd;
  }

  log(): string {
    return readFileSync(this.logFile, 'utf8').split('\n').slice(-8).join('\n');
  }

  async stop(): Promise<void> {
    const gone = new Promise((r) => this.proc.once('exit', r));
    if (this.proc.exitCode === null) {
      this.proc.kill('SIGKILL');
      await gone;
    }
    rmSync(this.root, { recursive: true, force: true });
  }
}
