/**
 * The error catalogue. Every error spcd raises on purpose is a SpcdError with
 * a code from this table. docs/reference/errors.md documents each code; a unit test
 * keeps the two in step. Never classify an error by its message: use `code`.
 */

export interface ErrorDef {
  /** HTTP status the API answers with when this error reaches a caller. */
  readonly status: number;
  /** One line for the docs: what it means. */
  readonly summary: string;
}

export const ERRORS = {
  // settings and input
  SETTINGS_INVALID: { status: 400, summary: 'A daemon flag or environment setting is invalid.' },
  SPEC_INVALID: {
    status: 422,
    summary: 'A container-set or override file failed validation (file, line and field named).',
  },
  SPEC_TOO_LARGE: { status: 413, summary: 'A definition file is larger than the size cap.' },
  SPEC_YAML: {
    status: 422,
    summary: 'A definition file is not valid YAML, or uses aliases or duplicate keys.',
  },
  SPEC_CYCLE: { status: 422, summary: 'depends_on forms a cycle.' },
  SPEC_IO: { status: 500, summary: 'A definition file or directory could not be read.' },
  CHECK_INVALID: { status: 422, summary: 'A health check definition is invalid.' },
  TEMPLATE_INVALID: {
    status: 422,
    summary: 'A config template failed to render (undefined variable, syntax, unsafe value).',
  },
  TEMPLATE_PATH: {
    status: 422,
    summary: 'A template or destination path leaves its allowed directory.',
  },
  UNTRUSTED_PATH: {
    status: 422,
    summary:
      'An input spcd reads as root (sets, overrides, globals, templates, checks, config root, a TLS file), its resolved target or a folder above either, is writable by, or owned by, someone other than root.',
  },
  SECRETS_INSECURE: {
    status: 422,
    summary:
      'A secret file (secrets, registry credentials, etcd key) is owned by someone other than root or readable by others than its owner.',
  },
  CONFIG_WRITE_FAILED: {
    status: 500,
    summary: 'Writing rendered config failed; the previous config is untouched.',
  },

  // engine
  ENGINE_UNAVAILABLE: { status: 503, summary: 'The Docker engine does not answer.' },
  ENGINE_TIMEOUT: { status: 504, summary: 'An engine call passed its deadline.' },
  ENGINE_NOT_FOUND: { status: 404, summary: 'The engine has no such container or image.' },
  ENGINE_CONFLICT: { status: 409, summary: 'The engine refused: name in use or state conflict.' },
  ENGINE_FAILED: { status: 502, summary: 'The engine answered with an error.' },
  ENGINE_UNSUPPORTED: {
    status: 422,
    summary: 'The engine that answers cannot run this definition as written; nothing was created.',
  },
  IMAGE_PULL_FAILED: {
    status: 502,
    summary: 'Pulling an image failed (registry down, missing tag, bad credentials).',
  },
  IMAGE_DIGEST_MISMATCH: {
    status: 422,
    summary: 'The pulled image digest is not the one the request pinned.',
  },
  IMAGE_REFUSED: {
    status: 403,
    summary:
      "The node's image policy (--image-policy) does not allow this image; nothing was pulled or created.",
  },
  REGISTRY_AUTH_INVALID: { status: 422, summary: 'The registry auth file is unreadable or malformed.' },
  VOLUME_CREATE_FAILED: {
    status: 502,
    summary:
      'A named volume a container binds is missing and the engine could not create it (or look it up).',
  },

  // state
  STATE_CORRUPT: { status: 500, summary: 'A state or journal file could not be parsed.' },
  STATE_WRITE_FAILED: { status: 500, summary: 'A state file could not be written atomically.' },
  STATE_LOCKED: {
    status: 409,
    summary:
      'Another live spcd has locked the state directory (its PID is named); this one refuses to start.',
  },

  // operations
  NOT_FOUND: { status: 404, summary: 'No such container, set, generation or route.' },
  CONFLICT: { status: 409, summary: 'Another operation has this container locked.' },
  ADOPT_BLOCKED: {
    status: 409,
    summary:
      'A container without spcd labels cannot be adopted: it differs from its definition, is not running, changed since it was planned, or a kolla-ansible unit could still stop or restart it.',
  },
  GENERATION_MISMATCH: {
    status: 409,
    summary: 'The request expected a generation that is not the current one.',
  },
  UPGRADE_FAILED: { status: 500, summary: 'An upgrade failed and was rolled back.' },
  ROLLBACK_FAILED: {
    status: 500,
    summary: 'An upgrade failed and so did its rollback; the container needs an operator.',
  },
  RECOVERY_QUARANTINED: {
    status: 409,
    summary:
      'A journal entry could not be finished or undone, or is malformed: spcd leaves that container alone until an operator clears it.',
  },
  HEALTH_GATE_FAILED: { status: 500, summary: 'The new generation did not become healthy in time.' },
  VM_SAFETY_REFUSED: {
    status: 409,
    summary: 'Stopping this hypervisor container would kill or orphan running VMs.',
  },
  DOMAIN_CENSUS_MISMATCH: {
    status: 500,
    summary:
      'After a hypervisor container was stopped and started again, its hypervisor lists other domains than before (reported, not rolled back).',
  },
  BOOTSTRAP_FAILED: { status: 500, summary: 'A bootstrap task failed or timed out.' },
  SHUTTING_DOWN: { status: 503, summary: 'spcd is shutting down and takes no new operations.' },
  DEFINITIONS_NOT_LOADED: {
    status: 409,
    summary: 'The definitions could not be read; spcd keeps what runs and refuses upgrades and rollbacks.',
  },

  // api
  BAD_REQUEST: { status: 400, summary: 'The request is malformed (JSON, parameters).' },
  BODY_TOO_LARGE: { status: 413, summary: 'The request body is larger than the cap.' },
  UNPROCESSABLE: { status: 422, summary: 'The request is well formed but its values are invalid.' },
  METHOD_NOT_ALLOWED: { status: 405, summary: 'The route does not take this method.' },
  SOCKET_IN_USE: { status: 500, summary: 'Another spcd already listens on the API socket.' },
  READ_ONLY_SOCKET: {
    status: 403,
    summary: 'The read-only socket serves only reads: writes and container logs need the admin socket.',
  },
  STREAM_BUDGET_FULL: {
    status: 503,
    summary:
      'The open log and event streams hold as much unread output as all of them may; no new stream is opened.',
  },

  // kube / fleet
  KUBE_UNAVAILABLE: { status: 503, summary: 'The Kubernetes API server does not answer.' },
  LEASE_CONFLICT: { status: 409, summary: 'A fleet upgrade slot was taken by another node first.' },
  KUBE_REJECTED: { status: 502, summary: 'The Kubernetes API server refused a request (RBAC, validation).' },
  KUBE_GONE: { status: 410, summary: 'A Kubernetes watch resourceVersion expired; the watcher re-lists.' },
  KUBECONFIG_INSECURE: {
    status: 422,
    summary:
      "The kubeconfig's current cluster is reached over plain http:// or with insecure-skip-tls-verify: true, and --kube-insecure is not given.",
  },
  ETCD_PERMISSION_DENIED: {
    status: 403,
    summary:
      "etcd refused this node's user or role (--etcd-user, or the client certificate's name) the key it read or wrote.",
  },
  FLEET_RECORD_INVALID: {
    status: 502,
    summary:
      'A fleet record in etcd or Kubernetes (the rollout ledger) is not one spcd wrote: the node takes no further step of the rollout until it is fixed.',
  },
  ETCD_UNAVAILABLE: {
    status: 503,
    summary: 'The etcd cluster does not answer (no member reachable, or no quorum).',
  },

  INTERNAL: { status: 500, summary: 'A bug: an unexpected error inside spcd.' },
} as const satisfies Record<string, ErrorDef>;

export type ErrorCode = keyof typeof ERRORS;

export class SpcdError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;

  constructor(
    code: ErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'SpcdError';
    this.code = code;
    this.details = details;
  }

  get status(): number {
    return ERRORS[this.code].status;
  }

  toJSON(): { code: ErrorCode; message: string; details: Record<string, unknown> } {
    return { code: this.code, message: this.message, details: this.details };
  }
}

export function isSpcdError(err: unknown, code?: ErrorCode): err is SpcdError {
  return err instanceof SpcdError && (code === undefined || err.code === code);
}

/** Wrap anything thrown into a SpcdError, keeping typed ones as they are. */
export function toSpcdError(err: unknown, fallback: ErrorCode = 'INTERNAL'): SpcdError {
  if (err instanceof SpcdError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new SpcdError(fallback, message, {}, { cause: err });
}

/**
 * Whether the error has the code, or wraps an error that has it: the
 * toJSON() of a cause or of a rollback's failure, kept in its details.
 */
export function involvesCode(
  e: { code: string; details?: Record<string, unknown> },
  code: ErrorCode,
): boolean {
  if (e.code === code) return true;
  return [e.details?.cause, e.details?.rollback].some(
    (w) =>
      typeof w === 'object' &&
      w !== null &&
      typeof (w as { code?: unknown }).code === 'string' &&
      involvesCode(w as { code: string; details?: Record<string, unknown> }, code),
  );
}
