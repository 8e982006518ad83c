/**
 * For a describe block whose tests run in order on shared state (one
 * daemon, one cluster, one host): once a test fails, the tests after it are
 * skipped with a note naming it, so that one failure reads as one failure and
 * not as every test after it failing on the state it left.
 */
import { beforeEach } from 'vitest';

/** Call at the top of the describe block (or the file) whose tests depend on the ones before. */
export function inOrder(): void {
  let failed: string | undefined;
  beforeEach((ctx) => {
    if (failed !== undefined)
      ctx.skip(`skipped: "${failed}" failed before it, on the state this test shares`);
    ctx.onTestFailed(() => {
      failed ??= ctx.task.name;
    });
  });
}
