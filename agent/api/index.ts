export { createApiHandler, type ApiHandler, type ApiHandlerDeps } from './handler.js';
export { listenUnix, listenMetricsTcp, type ApiServer, type ListenUnixOptions } from './socket.js';
export { DEFAULT_LIMITS, compileLimits, type ApiLimits } from './limits.js';
export type * from './types.js';
