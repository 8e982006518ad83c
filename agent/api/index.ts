export {
  createApiHandler,
  createApiHandlers,
  type ApiHandler,
  type ApiHandlerDeps,
  type ApiHandlers,
  type ApiTier,
} from './handler.js';
export { listenUnix, listenMetricsTcp, type ApiServer, type ListenUnixOptions } from './socket.js';
export { DEFAULT_LIMITS, compileLimits, type ApiLimits } from './limits.js';
export type * from './types.js';
