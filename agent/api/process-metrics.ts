import type { MetricsRegistry } from './registry.js';

/**
 * The process's own figures, under the names the Prometheus client libraries
 * use, so the usual dashboards read them as they are.
 */
export function registerProcessMetrics(registry: MetricsRegistry): void {
  // One reading per scrape, so used and total come from the same moment.
  let mem = process.memoryUsage();
  let memAt = 0;
  const memory = (): NodeJS.MemoryUsage => {
    const now = Date.now();
    if (now - memAt > 100) {
      mem = process.memoryUsage();
      memAt = now;
    }
    return mem;
  };
  const one = (value: () => number) => () => [{ labels: {}, value: value() }];
  registry.collect(
    'gauge',
    { name: 'process_resident_memory_bytes', help: 'Resident memory size in bytes.' },
    one(() => memory().rss),
  );
  registry.collect(
    'counter',
    { name: 'process_cpu_seconds_total', help: 'User and system CPU time spent in seconds.' },
    one(() => {
      const cpu = process.cpuUsage();
      return (cpu.user + cpu.system) / 1e6;
    }),
  );
  registry.collect(
    'gauge',
    {
      name: 'process_start_time_seconds',
      help: 'Start time of the process since the Unix epoch in seconds.',
    },
    one(() => Math.round((Date.now() - process.uptime() * 1000) / 1000)),
  );
  registry.collect(
    'gauge',
    { name: 'nodejs_heap_size_total_bytes', help: 'V8 heap size reserved, in bytes.' },
    one(() => memory().heapTotal),
  );
  registry.collect(
    'gauge',
    { name: 'nodejs_heap_size_used_bytes', help: 'V8 heap in use, in bytes.' },
    one(() => memory().heapUsed),
  );
  registry.collect(
    'gauge',
    {
      name: 'nodejs_external_memory_bytes',
      help: 'Memory of C++ objects bound to JavaScript objects, in bytes.',
    },
    one(() => memory().external),
  );
}
