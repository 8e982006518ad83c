import { castGrpcError, GRPCDeadlineExceededError, GRPCGenericError, GRPCUnavailableError } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { connectEtcd, etcdErrorText, unavailable } from '../../agent/etcd/client.js';
import { SpcdError } from '../../agent/errors.js';

/** grpc-js's text for a member that refuses the connection (load-balancer-pick-first.js), resolver note empty. */
const REFUSED =
  '14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:2379. Resolution note: ';

describe('etcd errors shown to the operator', () => {
  it('an unreachable member: the empty resolution note and the nested "Error: " are cut, the error kept as cause', () => {
    // What etcd3 does with grpc-js's error: a plain Error with code 14 becomes GRPCUnavailableError.
    const grpc = castGrpcError(Object.assign(new Error(REFUSED), { code: 14 }));
    expect(grpc).toBeInstanceOf(GRPCUnavailableError);
    const e = unavailable(grpc, 'listing the slot queue');
    expect(e).toBeInstanceOf(SpcdError);
    expect(e.code).toBe('ETCD_UNAVAILABLE');
    expect(e.message).toBe(
      'etcd: listing the slot queue: 14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED 127.0.0.1:2379',
    );
    expect(e.details).toEqual({ during: 'listing the slot queue' });
    expect(e.cause).toBe(grpc);
  });

  it('the etcd3 class made directly, and a resolution note with text, which stays', () => {
    const note = new GRPCUnavailableError(
      '14 UNAVAILABLE: No connection established. Last error: Error: getaddrinfo ENOTFOUND etcd-1. Resolution note: DNS resolution failed for etcd-1:2379',
    );
    expect(unavailable(note, 'reading the rollout ledger').message).toBe(
      'etcd: reading the rollout ledger: 14 UNAVAILABLE: No connection established. Last error: getaddrinfo ENOTFOUND etcd-1. Resolution note: DNS resolution failed for etcd-1:2379',
    );
    expect(etcdErrorText(new GRPCUnavailableError(REFUSED))).toBe(
      '14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED 127.0.0.1:2379',
    );
  });

  it('other texts pass unchanged, and an SpcdError stays itself', () => {
    const late = new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED: Deadline exceeded');
    expect(unavailable(late, 'writing this node phase').message).toBe(
      'etcd: writing this node phase: 4 DEADLINE_EXCEEDED: Deadline exceeded',
    );
    const own = new SpcdError('INTERNAL', 'a bug');
    expect(unavailable(own, 'anything')).toBe(own);
  });

  it('a real client against a closed loopback port: its error shows no empty resolution note', async () => {
    const client = connectEtcd({ endpoints: ['http://127.0.0.1:1'], callTimeoutMs: 3_000 });
    try {
      const err = await client
        .get('spcd-test')
        .string()
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(GRPCGenericError);
      const e = unavailable(err, 'reading the desired key');
      expect(e.message.startsWith('etcd: reading the desired key: ')).toBe(true);
      expect(e.message).not.toMatch(/Resolution note:\s*$/);
      expect(e.message).not.toContain('Error: ');
      expect(e.cause).toBe(err);
    } finally {
      client.close();
    }
  }, 30_000);
});
