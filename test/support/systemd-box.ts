/**
 * `docker run` options for a container that runs Debian's systemd as PID 1
 * (these machines have none) and reaches the host's engine through its
 * socket: what systemd needs (a tmpfs /run and /run/lock, the host's cgroup
 * tree), and every capability but SYS_RESOURCE, which this VM's bounding set
 * lacks (test-environment.md), instead of --privileged.
 */
export const SYSTEMD_BOX_OPTIONS: readonly string[] = [
  '--cap-add',
  'ALL',
  '--cap-drop',
  'SYS_RESOURCE',
  '--security-opt',
  'seccomp=unconfined',
  '--security-opt',
  'apparmor=unconfined',
  '--tmpfs',
  '/run',
  '--tmpfs',
  '/run/lock',
  '--cgroupns=host',
  '-v',
  '/sys/fs/cgroup:/sys/fs/cgroup:rw',
  '-v',
  '/var/run/docker.sock:/var/run/docker.sock',
];

/** `docker run` arguments for such a box named `name`, with these extra binds ("source:target[:mode]"). */
export function systemdBoxRun(name: string, binds: readonly string[], image: string): string[] {
  return ['run', '-d', '--name', name, ...SYSTEMD_BOX_OPTIONS, ...binds.flatMap((b) => ['-v', b]), image];
}
