import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A small tmpfs mounted as spcd's state directory, so the run can fill it
 * (ENOSPC on every write) and free it again. Only as root; undefined when
 * the mount is not possible here.
 */
export class DiskFiller {
  private constructor(readonly dir: string) {}

  /** Larger than preflight's 100 MiB floor for the state directory, so a start is not blocked. */
  static mount(dir: string, sizeKiB = 120 * 1024): DiskFiller | undefined {
    if (process.getuid?.() !== 0) return undefined;
    mkdirSync(dir, { recursive: true });
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKiB}k,mode=0700`, 'tmpfs', dir], {
        stdio: 'ignore',
      });
    } catch {
      return undefined;
    }
    const filler = new DiskFiller(dir);
    // Even when the run dies half-way, leave no mount behind.
    process.once('exit', () => filler.unmount());
    return filler;
  }

  private get filler(): string {
    return join(this.dir, '.chaos-filler');
  }

  /** Writes until the filesystem is full. */
  fill(): void {
    const chunk = Buffer.alloc(1024 * 1024, 0x41);
    for (let i = 0; i < 1024; i++) {
      try {
        writeFileSync(this.filler, chunk, { flag: 'a' });
      } catch {
        break; // ENOSPC: full
      }
    }
    for (let i = 0; i < 64; i++) {
      try {
        writeFileSync(`${this.filler}.${i}`, Buffer.alloc(1024, 0x41));
      } catch {
        break;
      }
    }
  }

  free(): void {
    rmSync(this.filler, { force: true });
    for (let i = 0; i < 64; i++) rmSync(`${this.filler}.${i}`, { force: true });
  }

  unmount(): void {
    this.free();
    try {
      execFileSync('umount', ['-l', this.dir], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
}
