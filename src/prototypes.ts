/**
 * V8 leaves `String.prototype` in dictionary mode once a class extends `String` (`@redis/client`'s
 * `VerbatimString` does, when it loads), until a property store looks up a chain through it. Until then every
 * method call on a string primitive takes a slow path: `charCodeAt` in a loop 5× slower, `startsWith` 2×,
 * msgpackr's encoder (every record and journal entry a commit writes) 3×. One store on an object made from each
 * builtin prototype makes them fast again; `test/unit/prototypes.test.ts` checks the service after start-up.
 */
const BUILTINS = [Object, Function, Array, String, Number, Boolean, Symbol, BigInt, Date, RegExp, Error, Map, Set, WeakMap, Promise, ArrayBuffer, DataView, Uint8Array, Object.getPrototypeOf(Uint8Array)];

export function fastBuiltinPrototypes(): void {
  for (const C of BUILTINS) (Object.create(C.prototype) as { fastened?: boolean }).fastened = true;
}
