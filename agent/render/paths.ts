import { posix } from 'node:path';
import { SpcdError } from '../errors.js';

/**
 * Name checks for everything render/ turns into a path: template names,
 * destination files inside a container's config directory, container names
 * used as directory names. Each refuses absolute paths, `..`, empty or `.`
 * segments, backslashes and control characters. The checks are on the text;
 * loader.ts and writer.ts add the file-system half (realpath containment, no
 * symlinks followed).
 */

const MAX_PATH = 1024;
const MAX_SEGMENT = 255;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Why a relative path is unsafe, or undefined when it is fine. */
export function relativePathProblem(p: string): string | undefined {
  if (p.length === 0) return 'is empty';
  if (p.length > MAX_PATH) return `is longer than ${MAX_PATH} characters`;
  if (CONTROL.test(p)) return 'contains a control character';
  if (p.includes('\\')) return 'contains a backslash';
  if (p.startsWith('/')) return 'is absolute';
  for (const seg of p.split('/')) {
    if (seg === '..') return 'contains ".."';
    if (seg === '' || seg === '.') return 'has an empty or "." segment';
    if (seg.length > MAX_SEGMENT) return `has a segment longer than ${MAX_SEGMENT} characters`;
  }
  return undefined;
}

export function checkTemplateName(name: string): string {
  const problem = relativePathProblem(name);
  if (problem) {
    throw new SpcdError('TEMPLATE_PATH', `template name ${JSON.stringify(name)} ${problem}`, {
      template: name,
    });
  }
  return name;
}

export function checkDest(dest: string, container: string): string {
  const problem = relativePathProblem(dest);
  if (problem) {
    throw new SpcdError(
      'TEMPLATE_PATH',
      `container ${container}: config dest ${JSON.stringify(dest)} ${problem}`,
      { container, dest },
    );
  }
  return dest;
}

/** An absolute, normalized path inside the container (kolla copies the file there). */
export function checkContainerPath(p: string, container: string): string {
  const bad = (why: string): SpcdError =>
    new SpcdError('TEMPLATE_PATH', `container ${container}: containerPath ${JSON.stringify(p)} ${why}`, {
      container,
      containerPath: p,
    });
  if (!p.startsWith('/')) throw bad('is not absolute');
  if (p.length > MAX_PATH) throw bad(`is longer than ${MAX_PATH} characters`);
  if (CONTROL.test(p)) throw bad('contains a control character');
  if (p.split('/').includes('..')) throw bad('contains ".."');
  if (posix.normalize(p) !== p || (p.length > 1 && p.endsWith('/'))) throw bad('is not normalized');
  return p;
}

const CONTAINER_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;

/** Docker's own name rule, which also keeps the name a single safe path segment. */
export function checkContainerName(name: string): string {
  if (!CONTAINER_NAME.test(name)) {
    throw new SpcdError(
      'TEMPLATE_PATH',
      `container name ${JSON.stringify(name)} is not a safe directory name`,
      {
        container: name,
      },
    );
  }
  return name;
}

/** Resolve a relative include ("./x.j2", "../y.j2") against its parent template's name. */
export function resolveRelative(parent: string, name: string): string {
  const joined = posix.join(posix.dirname(parent), name);
  // posix.join normalizes: "a/../../b" -> "../b", which checkTemplateName refuses.
  return joined;
}

/** True when `child` is `root` or inside it (both absolute, resolved). */
export function isInside(root: string, child: string): boolean {
  if (child === root) return true;
  const prefix = root.endsWith('/') ? root : `${root}/`;
  return child.startsWith(prefix);
}
