/** Compiled TypeBox validation mapped to catalogue codes with `details.field`. */
import Type, { type Static, type TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import { Value } from 'typebox/value';
import { AppError, type ErrorCode } from './errors.js';

export interface Validator<T = unknown> {
  schema: TSchema;
  check(v: unknown): v is T;
  errors(v: unknown): { keyword: string; instancePath: string; params: Record<string, unknown>; message: string }[];
}

export function compile<S extends TSchema>(schema: S): Validator<Static<S>> {
  type T = Static<S>;
  const c = Compile(schema);
  return { schema, check: (v): v is T => c.Check(v), errors: (v) => [...c.Errors(v)] as never };
}

/**
 * Throws the first failure: a missing field is VALIDATION_FIELD_REQUIRED, anything else VALIDATION_INVALID_TYPE, unless the route names its own domain code.
 * A free-form field nested deeper than MAX_JSON_DEPTH is VALIDATION_INVALID_TYPE whatever the route (the store's encoder recurses).
 */
export function validate<T>(v: Validator<T>, value: unknown, domainCode?: ErrorCode): T {
  if (v.check(value)) return withinDepth(v.schema, value, '', domainCode);
  const first = v.errors(value)[0];
  const required = first?.keyword === 'required';
  const field = required
    ? String((first.params.requiredProperties as string[])[0])
    : (first?.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.') || 'body';
  const code: ErrorCode = domainCode ?? (required ? 'VALIDATION_FIELD_REQUIRED' : 'VALIDATION_INVALID_TYPE');
  const limit = first?.keyword === 'maxLength' ? { limit: first.params.limit } : {};
  throw new AppError(code, required ? `${field} is required` : `${field}: ${first?.message ?? 'invalid'}`, { field, reason: first?.keyword ?? 'invalid', ...limit });
}

/**
 * The bound, in UTF-8 bytes, of every field that becomes part of a store key or an index name (docs/reliability.md,
 * Key limits). LMDB refuses a key past 1978 bytes; each bound leaves room for the rest of its composite key (prefix,
 * the other fields, the member), counting a field the store percent-encodes (memory namespaces and entities) at 3
 * bytes a byte: the longest, a memory entity index, is at most 36 + 3 x (200 + 200) = 1236 bytes.
 */
export const KEY_LIMITS = {
  /** tags of signals, artifacts, memories, workspace items, workstreams, and tag filters */
  tag: 200,
  /** workspace item and artifact names (a filesystem's 255 bytes) */
  name: 255,
  /** identity names; role and ring names */
  identity_name: 200,
  role_name: 100,
  ring_name: 100,
  /** memory namespaces and entities */
  namespace: 200,
  entity: 200,
  signal_type: 100,
  /** a task signal's payload.task_type (an open-task index per type) */
  task_type: 100,
  /** a task's concurrency_key (a lease-count record per key) */
  concurrency_key: 200,
  capability: 200,
  /** reservation projects and paths */
  project: 200,
  path: 1024,
  idempotency_key: 255,
  /** a memory import line's foreign id; the uploader filter of artifact lists */
  foreign_id: 255,
} as const;
export type KeyField = keyof typeof KEY_LIMITS;
/** the schema keyword carrying a key field's byte bound (an OpenAPI extension, ignored by the schema checker itself) */
const MAX_BYTES = 'x-max-bytes';

/** A string that becomes (part of) a store key: non-empty, at most KEY_LIMITS[kind] bytes of UTF-8 (so never more characters than that). */
export const Key = (kind: KeyField) => Type.String({ minLength: 1, maxLength: KEY_LIMITS[kind], [MAX_BYTES]: KEY_LIMITS[kind] });

/** Throws `code` naming `field` when a key field parsed outside a schema (upload fields, payload.task_type, a path) is empty or past its bound. */
export function boundKey(value: string, field: string, kind: KeyField, code: ErrorCode = 'VALIDATION_INVALID_TYPE'): string {
  if (!value) throw new AppError(code, `${field} must not be empty`, { field, reason: 'minLength' });
  return overlong(value, KEY_LIMITS[kind], field, code);
}

function overlong(value: string, limit: number, field: string, code: ErrorCode): string {
  if (Buffer.byteLength(value, 'utf8') > limit) throw new AppError(code, `${field} is longer than ${limit} bytes (UTF-8)`, { field, reason: 'maxLength', limit });
  return value;
}

/** How deep a free-form JSON value (metadata, payload, ...) may nest: objects and arrays count, `{"a":{}}` is 2 (docs/reliability.md). */
export const MAX_JSON_DEPTH = 64;

type Schema = { type?: unknown; properties?: Record<string, Schema>; items?: unknown; anyOf?: Schema[]; [MAX_BYTES]?: number };

/** A key field's byte bound, also when it is one choice of a union (`Key` or null). */
const maxBytes = (s: Schema): number | undefined => s[MAX_BYTES] ?? s.anyOf?.find((x) => x[MAX_BYTES] !== undefined)?.[MAX_BYTES];

/**
 * Walks the schema's declared objects and arrays with the value; anything else the schema leaves open (a
 * record, unknown, a union, an undeclared property) is free-form and may nest MAX_JSON_DEPTH deep. A key
 * field (`Key`) is held to its byte bound here, with the route's own code like the schema's other checks.
 */
function withinDepth<T>(schema: Schema, value: T, path: string, code?: ErrorCode): T {
  if (schema.type === 'object' && schema.properties && isObject(value)) {
    for (const k of Object.keys(value)) withinDepth(Object.hasOwn(schema.properties, k) ? schema.properties[k] : {}, value[k], path ? `${path}.${k}` : k, code);
  } else if (schema.type === 'array' && isObject(schema.items) && Array.isArray(value)) {
    value.forEach((x, i) => withinDepth(schema.items as Schema, x, path ? `${path}.${i}` : String(i), code));
  } else if (typeof value === 'string' && maxBytes(schema) !== undefined) overlong(value, maxBytes(schema)!, path || 'body', code ?? 'VALIDATION_INVALID_TYPE');
  else boundDepth(value, path || 'body');
  return value;
}

/** A whole message a protocol library reads (and converts, recursively) before our validation sees its fields: A2A's. */
export const MAX_DOCUMENT_DEPTH = 2 * MAX_JSON_DEPTH;

/** Throws VALIDATION_INVALID_TYPE naming `field` when `value` nests deeper than `limit`: free-form JSON parsed outside a schema (upload fields). */
export function boundDepth(value: unknown, field: string, limit = MAX_JSON_DEPTH): void {
  if (deeper(value, limit)) throw new AppError('VALIDATION_INVALID_TYPE', `${field} nests deeper than ${limit} levels`, { field, reason: 'depth', limit });
}

/** The depth rule of `validate` for a value a validator's `check` already passed (memory import lines). */
export const checkDepth = <T>(v: Validator<T>, value: T): T => withinDepth(v.schema, value, '');

/** Whether `v` nests more than `depth` objects or arrays deep; stops at the first level past it, so it never recurses further. */
function deeper(v: unknown, depth: number): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (depth === 0) return true;
  for (const k in v) if (Object.hasOwn(v, k) && deeper((v as Record<string, unknown>)[k], depth - 1)) return true;
  return false;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Query strings arrive as text: convert numbers and booleans by the schema before checking. */
export function validateQuery<T>(v: Validator<T>, raw: Record<string, string>, domainCode?: ErrorCode): T {
  const converted = Value.Convert(v.schema, { ...raw }) as Record<string, unknown>;
  // Convert truncates "2.5" to an integer 2: keep the text wherever the number is not exactly what was sent.
  for (const k of Object.keys(raw)) if (typeof converted[k] === 'number' && (converted[k] as number) !== Number(raw[k])) converted[k] = raw[k];
  return validate(v, converted, domainCode);
}

/** A comma-separated query value as a list of its non-empty, trimmed items. */
export const commaList = (s: string | null | undefined): string[] | undefined => (s == null ? undefined : s.split(',').map((x) => x.trim()).filter(Boolean));
