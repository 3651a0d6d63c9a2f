/**
 * Tells every replica that something it may have cached changed, so it drops the cached copy
 * at once instead of when the copy expires (the authenticator keeps key rows for at most 1 s:
 * that TTL stays the guarantee, the bus makes it typically milliseconds).
 */

/** What changed. */
export type InvalidationEvent =
  /** A key was revoked or changed: drop its cached row (`Authenticator.forget`). */
  | { type: "key-changed"; publicId: string }
  /** An account was credited. Nothing caches balances today; sent for whoever will. */
  | { type: "account-credited"; accountId: string };

export type InvalidationListener = (event: InvalidationEvent) => void;

export interface InvalidationBus {
  /**
   * Tells the other replicas. Fire and forget: never throws and never waits; a message lost
   * while Redis is unreachable is covered by the cache TTL. The replica that publishes acts
   * on the change itself, directly: it does not receive its own events.
   */
  publish(event: InvalidationEvent): void;
  /** Calls `listener` for every event another replica publishes. */
  subscribe(listener: InvalidationListener): void;
  close(): Promise<void>;
}

/** The bus of a single server: there is nobody to tell. */
export function createLocalInvalidationBus(): InvalidationBus {
  return {
    publish() {},
    subscribe() {},
    async close() {},
  };
}

/** Reads an event from the wire; `undefined` for anything that is not one. */
export function parseInvalidationEvent(value: unknown): InvalidationEvent | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const fields = value as Record<string, unknown>;
  switch (fields.type) {
    case "key-changed":
      return typeof fields.publicId === "string"
        ? { type: "key-changed", publicId: fields.publicId }
        : undefined;
    case "account-credited":
      return typeof fields.accountId === "string"
        ? { type: "account-credited", accountId: fields.accountId }
        : undefined;
    default:
      return undefined;
  }
}
