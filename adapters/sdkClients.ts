/**
 * The AWS SDK clients Dynein makes, without the SDK's logger middleware.
 *
 * That middleware hands every command's input and output to the client's logger, and filters both
 * for sensitive fields first, member by member, even when the logger discards them, as the default
 * one does. For a dispatcher that is most of a query's page walked once more for nothing: on the
 * benchmark machine (2026-11-28) it cost ~300 µs of CPU per empty `Query` and ~700 µs per page of 50
 * items, about a third of the client's own cost. Dynein logs no SDK call through it (its own log
 * lines say what failed), so its clients go without; a client passed in by a caller is left as is.
 */
export function withoutSdkLogger<C extends { readonly middlewareStack: { remove(toRemove: string): boolean } }>(client: C): C {
  client.middlewareStack.remove('loggerMiddleware');
  return client;
}
