import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO, type Sandbox } from './daemon.js';

/** The demo set's containers, by the suffix of their names. */
export type DemoMember = 'libvirt' | 'compute' | 'ovs_agent';

/**
 * The bundled demo set (container-sets/demo/demo.yaml), and the host files
 * written for it (container-sets/hosts/), as a test runs them: each name
 * prefixed with the sandbox's instance, the compute stand-in's port and the
 * hypervisor's host folders made the test's own (the folders are created).
 */
export class BundledDemo {
  private constructor(
    private readonly sb: Sandbox,
    private readonly port: number,
  ) {}

  static create(sb: Sandbox, port: number): BundledDemo {
    mkdirSync(join(sb.root, 'run-libvirt'), { recursive: true });
    mkdirSync(join(sb.root, 'lib-libvirt'), { recursive: true });
    return new BundledDemo(sb, port);
  }

  name(member: DemoMember): string {
    return `${this.sb.instance}-${member}`;
  }

  /** A file of the repository (`container-sets/demo/demo.yaml`), made the test's own. */
  read(repoPath: string): string {
    return readFileSync(join(REPO, repoPath), 'utf8')
      .replace(/\bdemo_(libvirt|compute|ovs_agent)\b/g, (_m, s: DemoMember) => this.name(s))
      .replaceAll('18775', String(this.port))
      .replaceAll('/run/spcd-demo/libvirt', join(this.sb.root, 'run-libvirt'))
      .replaceAll('/var/lib/spcd-demo/libvirt', join(this.sb.root, 'lib-libvirt'));
  }
}
