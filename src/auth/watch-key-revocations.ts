import type { Logger } from "pino";
import type { Store } from "../store/store.ts";

/** Where a key that no longer works is told: the request bodies it is still sending are cut. */
export interface KeyRevocations {
  /**
   * A key changed (through this replica's admin API, or another's, told on the cluster bus):
   * when it no longer works then (revoked, expired or gone), every listener hears its public id.
   * A key that expires with no change told is not heard of (its requests' bodies run on), nor is
   * one revoked while a request of it was being admitted (its next request is refused).
   */
  changed(publicId: string): void;
  /** Adds a listener of keys that no longer work. */
  watch(listener: (publicId: string) => void): void;
}

/**
 * Revocations as they happen. A revoked key's requests already admitted run on (an answer being
 * written is finished), but a body still being sent is cut: four accounts whose keys held the
 * body budget with bodies sent but for their last bytes kept every other tenant out, and
 * revoking the keys did not end it for up to the request timeout (5 minutes).
 */
export function watchKeyRevocations(options: { store: Store; logger: Logger }): KeyRevocations {
  const listeners = new Set<(publicId: string) => void>();
  return {
    changed(publicId) {
      if (listeners.size === 0) return;
      options.store.getApiKeyByPublicId(publicId).then(
        (key) => {
          const works =
            key !== undefined &&
            key.revokedAt === undefined &&
            (key.expiresAt === undefined || key.expiresAt.getTime() > Date.now());
          if (works) return;
          for (const listener of listeners) listener(publicId);
        },
        (error: unknown) =>
          options.logger.warn(
            { err: error, publicId },
            "could not read a changed key; its bodies being sent are not cut",
          ),
      );
    },
    watch(listener) {
      listeners.add(listener);
    },
  };
}
