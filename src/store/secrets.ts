/**
 * The keyspace of the service's own secrets (the artifact share-link key): `secret:<name>`. No route builds a
 * key under it, so no id a client sends reaches one (test/api/authz-secrets.test.ts sweeps the live routes).
 */
export const secretKey = (name: string): string => `secret:${name}`;
