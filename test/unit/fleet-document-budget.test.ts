import { describe, expect, it } from 'vitest';
import { parseEtcdDesired } from '../../agent/etcd/desired.js';
import { parseDesired } from '../../agent/kube/desired-watcher.js';

/** The desired document, from a ConfigMap or an etcd key, under the YAML budget of one load. */
describe('the fleet desired document has a YAML budget', () => {
  const many = (n: number): string => `[${Array.from({ length: n }, () => '0').join(',')}]`;
  const deep = (n: number): string => `${'['.repeat(n)}${']'.repeat(n)}`;

  it('the ConfigMap: one budget over its three keys (the rollout is read before the globals), the key named', () => {
    const cm = (data: Record<string, string>) => ({ metadata: { name: 'spcd-desired' }, data });
    expect(() =>
      parseDesired(cm({ images: '{}', globals: `a: ${many(30_000)}`, rollout: `b: ${many(30_000)}` })),
    ).toThrow(
      expect.objectContaining({
        code: 'SPEC_TOO_LARGE',
        details: expect.objectContaining({ key: 'globals' }),
      }),
    );
    expect(() => parseDesired(cm({ globals: `a: ${deep(60)}` }))).toThrow(
      'ConfigMap spcd-desired key "globals": line 1: nests deeper than 40 levels',
    );
    expect(() => parseDesired(cm({ images: 'a: &x b\nc: *x\n' }))).toThrow(
      expect.objectContaining({
        code: 'SPEC_YAML',
        message: expect.stringContaining('anchors and aliases are not allowed'),
      }),
    );
    expect(
      parseDesired(cm({ images: 'nova_compute: r/nova:2', globals: `a: ${many(1000)}` })).images,
    ).toEqual({
      nova_compute: 'r/nova:2',
    });
  });

  it('the etcd key: the whole value under the budget, the key named', () => {
    expect(() => parseEtcdDesired(`globals: { a: ${many(60_000)} }`, '/spcd/desired', '7')).toThrow(
      expect.objectContaining({
        code: 'SPEC_TOO_LARGE',
        details: expect.objectContaining({ key: '/spcd/desired' }),
      }),
    );
    expect(() => parseEtcdDesired(`x: ${'a'.repeat(5 * 1024 * 1024)}`, '/spcd/desired', '7')).toThrow(
      /over the 4194304-byte total one document may hold/,
    );
  });
});
