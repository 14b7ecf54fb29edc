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

/** Throws the first failure: a missing field is VALIDATION_FIELD_REQUIRED, anything else VALIDATION_INVALID_TYPE, unless the route names its own domain code. */
export function validate<T>(v: Validator<T>, value: unknown, domainCode?: ErrorCode): T {
  if (v.check(value)) return value;
  const first = v.errors(value)[0];
  const required = first?.keyword === 'required';
  const field = required
    ? String((first.params.requiredProperties as string[])[0])
    : (first?.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.') || 'body';
  const code: ErrorCode = domainCode ?? (required ? 'VALIDATION_FIELD_REQUIRED' : 'VALIDATION_INVALID_TYPE');
  throw new AppError(code, required ? `${field} is required` : `${field}: ${first?.message ?? 'invalid'}`, { field, reason: first?.keyword ?? 'invalid' });
}

/** Query strings arrive as text: convert numbers and booleans by the schema before checking. */
export function validateQuery<T>(v: Validator<T>, raw: Record<string, string>, domainCode?: ErrorCode): T {
  const converted = Value.Convert(v.schema, { ...raw }) as Record<string, unknown>;
  // Convert truncates "2.5" to an integer 2: keep the text wherever the number is not exactly what was sent.
  for (const k of Object.keys(raw)) if (typeof converted[k] === 'number' && (converted[k] as number) !== Number(raw[k])) converted[k] = raw[k];
  return validate(v, converted, domainCode);
}

/** A comma-separated query value as a list of its non-empty, trimmed items. */
export const commaList = (s: string | null | undefined): string[] | undefined => (s == null ? undefined : s.split(',').map((x) => x.trim()).filter(Boolean));
