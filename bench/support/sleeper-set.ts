import { writeFileSync } from 'node:fs';

/**
 * Writes a set of n idle demo containers (`demo-service sleep`, no network),
 * named `<prefix>_<i>`, as the benchmarks that measure the daemon need.
 */
export function writeSleeperSet(
  file: string,
  set: string,
  description: string,
  prefix: string,
  n: number,
): void {
  const lines = [`set: ${set}`, `description: ${description}`, 'containers:'];
  for (let i = 0; i < n; i++) {
    lines.push(
      `  ${prefix}_${i}:`,
      '    image: spcd-demo/service:1',
      '    command: [demo-service, sleep]',
      '    network: none',
      '    stop_grace_period: 1s',
    );
  }
  writeFileSync(file, `${lines.join('\n')}\n`);
}
