/** Compiled TypeBox validation mapped to catalogue codes with `details.field`. */
import type { Static, TSchema } from 'typebox';
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
  if (v.check(value)) return withinDepth(v.schema, value, '');
  const first = v.errors(value)[0];
  const required = first?.keyword === 'required';
  const field = required
    ? String((first.params.requiredProperties as string[])[0])
    : (first?.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.') || 'body';
  const code: ErrorCode = domainCode ?? (required ? 'VALIDATION_FIELD_REQUIRED' : 'VALIDATION_INVALID_TYPE');
  throw new AppError(code, required ? `${field} is required` : `${field}: ${first?.message ?? 'invalid'}`, { field, reason: first?.keyword ?? 'invalid' });
}

/** How deep a free-form JSON value (metadata, payload, ...) may nest: objects and arrays count, `{"a":{}}` is 2 (docs/reliability.md). */
export const MAX_JSON_DEPTH = 64;

type Schema = { type?: unknown; properties?: Record<string, Schema>; items?: unknown };

/**
 * Walks the schema's declared objects and arrays with the value; anything else the schema leaves open (a
 * record, unknown, a union, an undeclared property) is free-form and may nest MAX_JSON_DEPTH deep.
 */
function withinDepth<T>(schema: Schema, value: T, path: string): T {
  if (schema.type === 'object' && schema.properties && isObject(value)) {
    for (const k of Object.keys(value)) withinDepth(Object.hasOwn(schema.properties, k) ? schema.properties[k] : {}, value[k], path ? `${path}.${k}` : k);
  } else if (schema.type === 'array' && isObject(schema.items) && Array.isArray(value)) {
    value.forEach((x, i) => withinDepth(schema.items as Schema, x, path ? `${path}.${i}` : String(i)));
  } else boundDepth(value, path || 'body');
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
