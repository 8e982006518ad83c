/**
 * The process's own figures in Prometheus text format, under the names the
 * Prometheus client libraries use, so the usual dashboards read them as they are.
 */
export function processMetrics(): string {
  const mem = process.memoryUsage();
  const cpu = process.cpuUsage();
  const startSeconds = Math.round((Date.now() - process.uptime() * 1000) / 1000);
  return [
    '# HELP process_resident_memory_bytes Resident memory size in bytes.',
    '# TYPE process_resident_memory_bytes gauge',
    `process_resident_memory_bytes ${mem.rss}`,
    '# HELP process_cpu_seconds_total User and system CPU time spent in seconds.',
    '# TYPE process_cpu_seconds_total counter',
    `process_cpu_seconds_total ${(cpu.user + cpu.system) / 1e6}`,
    '# HELP process_start_time_seconds Start time of the process since the Unix epoch in seconds.',
    '# TYPE process_start_time_seconds gauge',
    `process_start_time_seconds ${startSeconds}`,
    '# HELP nodejs_heap_size_total_bytes V8 heap size reserved, in bytes.',
    '# TYPE nodejs_heap_size_total_bytes gauge',
    `nodejs_heap_size_total_bytes ${mem.heapTotal}`,
    '# HELP nodejs_heap_size_used_bytes V8 heap in use, in bytes.',
    '# TYPE nodejs_heap_size_used_bytes gauge',
    `nodejs_heap_size_used_bytes ${mem.heapUsed}`,
    '# HELP nodejs_external_memory_bytes Memory of C++ objects bound to JavaScript objects, in bytes.',
    '# TYPE nodejs_external_memory_bytes gauge',
    `nodejs_external_memory_bytes ${mem.external}`,
    '',
  ].join('\n');
}
