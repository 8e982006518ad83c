import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { REPO } from '../support/daemon.js';

/**
 * The signed apt repository the install test installs from
 * (scripts/package/build-repo.sh), and the three forgeries apt must refuse
 * before anything is installed: the same package list signed by a key the
 * host does not trust, a package list rewritten after signing, and a package
 * swapped for another under the signed name.
 */

/** Where the box sees the repository, and the forgeries beside it. */
export const REPO_IN_BOX = '/srv/spcd-repo';
export const FORGED_IN_BOX = '/srv/forged';
/** Where apt's `signed-by` points: the repository's public key, copied in as an operator would. */
export const KEYRING = '/usr/share/keyrings/spcd-archive-keyring.gpg';

export type Forgery = 'stranger-key' | 'rewritten-index' | 'swapped-package';
export const FORGERIES: readonly Forgery[] = ['stranger-key', 'rewritten-index', 'swapped-package'];

/** The one-line source for the repository at `dir` in the box, checked against KEYRING. */
export function sourceLine(dir: string): string {
  return `deb [signed-by=${KEYRING}] file:${dir} ./`;
}

/**
 * The shell that points apt at `dir` alone (a list file of its own, no other
 * source), updates, and installs spcd. apt's exit status is the script's.
 */
export function aptInstall(dir: string): string {
  const list = `/etc/apt/sources.list.d/spcd${dir.replace(/\W+/g, '-')}.list`;
  const only = `-o Dir::Etc::sourcelist=${list} -o Dir::Etc::sourceparts=-`;
  return [
    `echo '${sourceLine(dir)}' > ${list}`,
    `apt-get ${only} update 2>&1`,
    `DEBIAN_FRONTEND=noninteractive apt-get ${only} install -y --no-install-recommends spcd 2>&1`,
  ].join(' && ');
}

/** The repository's single .deb file name. */
function debOf(repo: string): string {
  const debs = readdirSync(repo).filter((f) => f.endsWith('.deb'));
  if (debs.length !== 1) throw new Error(`${repo}: expected one .deb, found ${debs.join(', ') || 'none'}`);
  return debs[0]!;
}

/**
 * The forgeries of `repo` under `out/<forgery>`: the stranger's repository
 * is built by build-repo.sh with a key of its own (in `out/stranger-gnupg`);
 * `other` is a different package (the newer build) to swap in.
 */
export function forge(repo: string, other: string, out: string): void {
  mkdirSync(out, { recursive: true });
  execFileSync(
    'bash',
    [
      join(REPO, 'scripts/package/build-repo.sh'),
      '--out',
      join(out, 'stranger-key'),
      '--key-home',
      join(out, 'stranger-gnupg'),
      join(repo, debOf(repo)),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, SPCD_SIGNING_KEY: '' } },
  );
  const rewritten = join(out, 'rewritten-index');
  cpSync(repo, rewritten, { recursive: true });
  const packages = readFileSync(join(rewritten, 'Packages'), 'utf8').replace(
    /^Version: (.*)$/m,
    'Version: $1+forged',
  );
  writeFileSync(join(rewritten, 'Packages'), packages);
  writeFileSync(join(rewritten, 'Packages.gz'), gzipSync(packages));
  const swapped = join(out, 'swapped-package');
  cpSync(repo, swapped, { recursive: true });
  cpSync(other, join(swapped, debOf(repo)));
}
