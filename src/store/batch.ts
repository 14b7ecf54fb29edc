/**
 * Group commit: calls made while a batch is open (the rest of this event-loop turn) run together as one
 * `run(items)`, which answers one result per item in order; an Error in a slot fails only that caller.
 * A failure of the whole run fails every caller of that batch. A batch holds at most `maxItems`.
 */
export function batched<T, R>(run: (items: T[]) => Promise<(R | Error)[]>, maxItems = 256): (item: T) => Promise<R> {
  let open: { items: T[]; settle: { resolve: (r: R) => void; reject: (e: unknown) => void }[] } | undefined;
  const flush = async (batch: NonNullable<typeof open>) => {
    open = undefined;
    try {
      const results = await run(batch.items);
      results.forEach((r, i) => (r instanceof Error ? batch.settle[i].reject(r) : batch.settle[i].resolve(r)));
    } catch (e) {
      for (const s of batch.settle) s.reject(e);
    }
  };
  return (item: T) =>
    new Promise<R>((resolve, reject) => {
      // a full batch is closed (it runs at the same point) so one burst never makes one long transaction
      if (!open || open.items.length >= maxItems) {
        const batch = (open = { items: [], settle: [] });
        setImmediate(() => void flush(batch));
      }
      open.items.push(item);
      open.settle.push({ resolve, reject });
    });
}
