/* global AbortController */
// A node that takes one fleet slot in etcd and keeps it (its upgrade never
// ends) until it is killed: for the test that SIGKILLs a slot holder. Runs
// the built backend (dist/, made by the integration tests' global setup).
//   node test/support/etcd-slot-holder.mjs ENDPOINTS PREFIX NODE TTL_SECONDS
import { connectEtcd } from '../../dist/etcd/client.js';
import { EtcdRolloutBackend } from '../../dist/etcd/rollout-backend.js';
import { silentLogger } from '../../dist/log.js';
import { systemClock } from '../../dist/model/clock.js';

const [endpoints, prefix, node, ttl] = process.argv.slice(2);
const client = connectEtcd({ endpoints: endpoints.split(','), callTimeoutMs: 2000 });
const backend = new EtcdRolloutBackend({
  client,
  prefix,
  node,
  slotTtlSeconds: Number(ttl),
  clock: systemClock,
  log: silentLogger(),
});
await backend.withSlot(1, new AbortController().signal, async () => {
  process.stdout.write('holding\n');
  await new Promise(() => undefined);
});
