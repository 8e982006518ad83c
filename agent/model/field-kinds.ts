/**
 * The vocabulary of the field table (model/container-fields.ts): how a value
 * is read, where it goes in the create body, and the type it normalizes to.
 */

/** How a YAML value is read. Plain kinds are read and described (JSON Schema) by spec/; `custom` names a reader there. */
export type ValueKind =
  | { readonly kind: 'boolean' }
  | { readonly kind: 'integer'; readonly min: number; readonly max: number }
  /** "64m", "1g" or bytes; normalized to bytes. */
  | { readonly kind: 'size'; readonly min: number }
  /** "10s", "500ms" or milliseconds; normalized to milliseconds. */
  | { readonly kind: 'duration'; readonly min: number }
  | { readonly kind: 'string'; readonly pattern: RegExp; readonly what: string }
  | { readonly kind: 'absPath' }
  | { readonly kind: 'oneOf'; readonly values: readonly string[] }
  /** A list of strings, order kept. */
  | { readonly kind: 'strings'; readonly nonEmpty?: boolean }
  /** A mapping key -> scalar (string, number, boolean) as text, sorted by key. */
  | {
      readonly kind: 'textMap';
      readonly keyPattern: RegExp;
      readonly what: string;
      /** Refuse NUL, CR and LF in values. */
      readonly lineSafe?: boolean;
      /** Keys starting with this (any case) are refused. */
      readonly reservedPrefix?: string;
    }
  | CustomKind<unknown>;

/** A value read by spec/'s reader of this name; T is its normalized type. */
export interface CustomKind<T> {
  readonly kind: 'custom';
  readonly reader: CustomReaderName;
  /** Type only: never set. */
  readonly type?: T;
}

export type CustomReaderName =
  | 'network'
  | 'capabilities'
  | 'binds'
  | 'tmpfs'
  | 'devpts'
  | 'devices'
  | 'ulimits'
  | 'sysctls'
  | 'dependsOn'
  | 'healthchecks'
  | 'config'
  | 'permissions'
  | 'bootstrap'
  | 'census';

export function custom<T>(reader: CustomReaderName): CustomKind<T> {
  return { kind: 'custom', reader };
}

/**
 * Where a value goes in the create body: a HostConfig or top-level key (the
 * value as it is, copied; left out when undefined, or when `omitDefault` and
 * at its default), 'custom' (engine/create-options.ts maps it, the compiler
 * makes it) or 'none' (not an engine option: health checks, config files).
 */
export type EngineTarget =
  { readonly host: string; readonly omitDefault?: boolean } | { readonly body: string } | 'custom' | 'none';

export interface FieldDef {
  readonly key: string;
  readonly value: ValueKind;
  /** The normalized value when the key is absent; without one the field is optional (and absent when empty). */
  readonly default?: unknown;
  readonly required?: boolean;
  /**
   * In the spec hash (model/hash.ts): true, false, or 'unless-default' (left
   * out at its default). A new row must be hash-neutral when unused: no
   * default, or false, [] or {}.
   */
  readonly hash: boolean | 'unless-default';
  readonly engine: EngineTarget;
  /** One line for the JSON Schema (what an editor shows); the table in docs/reference/container-sets.md says more. */
  readonly doc: string;
}

/** The normalized type of a value kind. */
export type ValueOf<K> = K extends { readonly kind: 'boolean' }
  ? boolean
  : K extends { readonly kind: 'integer' | 'size' | 'duration' }
    ? number
    : K extends { readonly kind: 'oneOf'; readonly values: readonly (infer V)[] }
      ? V
      : K extends { readonly kind: 'strings' }
        ? readonly string[]
        : K extends { readonly kind: 'textMap' }
          ? Readonly<Record<string, string>>
          : K extends CustomKind<infer T>
            ? T
            : string;
