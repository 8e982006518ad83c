/**
 * The label codec. Labels on a container are the source of its identity:
 * spcd never touches a container that does not carry a complete, valid set.
 */

export const LABEL = {
  instance: 'spcd.instance',
  set: 'spcd.set',
  container: 'spcd.container',
  generation: 'spcd.generation',
  specHash: 'spcd.spec-hash',
  configHash: 'spcd.config-hash',
  /** Set on one-shot bootstrap task containers: never an instance of the service. */
  task: 'spcd.task',
  /**
   * The image reference as the definition gives it. Podman keeps only the
   * name it resolved (`localhost/x:1` for `x:1`); spcd reports and compares
   * the operator's. Not part of the identity.
   */
  image: 'spcd.image',
} as const;

export const RESERVED_LABEL_PREFIX = 'spcd.';

/** Labels on a named volume spcd created; one that existed before is never labelled. */
export const VOLUME_LABEL = {
  createdBy: 'spcd.volume.created-by',
  /** The container it was first created for. */
  container: 'spcd.volume.container',
} as const;

/** The labels of a volume spcd creates for `container`: created by spcd, and spcd's instance. */
export function volumeLabels(instance: string, container: string): Record<string, string> {
  return {
    [VOLUME_LABEL.createdBy]: 'spcd',
    [LABEL.instance]: instance,
    [VOLUME_LABEL.container]: container,
  };
}

export interface Identity {
  /** Which spcd instance owns it (several may share one engine, e.g. in tests). */
  readonly instance: string;
  readonly set: string;
  readonly container: string;
  readonly generation: number;
  readonly specHash: string;
  /** Hash of the rendered config; "none" when the container has no config files. */
  readonly configHash: string;
}

export function encodeIdentity(id: Identity): Record<string, string> {
  return {
    [LABEL.instance]: id.instance,
    [LABEL.set]: id.set,
    [LABEL.container]: id.container,
    [LABEL.generation]: String(id.generation),
    [LABEL.specHash]: id.specHash,
    [LABEL.configHash]: id.configHash,
  };
}

/** Returns undefined unless every label is present and well formed. */
export function decodeIdentity(labels: Readonly<Record<string, string>> | undefined): Identity | undefined {
  if (!labels) return undefined;
  const instance = labels[LABEL.instance];
  const set = labels[LABEL.set];
  const container = labels[LABEL.container];
  const generationText = labels[LABEL.generation];
  const specHash = labels[LABEL.specHash];
  const configHash = labels[LABEL.configHash] ?? 'none';
  if (!instance || !set || !container || !generationText || !specHash) return undefined;
  if (!/^[1-9][0-9]{0,14}$/.test(generationText)) return undefined;
  return { instance, set, container, generation: Number(generationText), specHash, configHash };
}
