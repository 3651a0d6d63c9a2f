import type { Store } from "../store/store.ts";

/** A store opened on first use: see {@link openStoreLazily}. */
export interface LazyStore {
  /** Opens the store at its first call, then delegates every call to it. */
  readonly store: Store;
  /** The error opening the store failed with, once it has: told as it is, not as a command's failure. */
  readonly openError: unknown;
  /** Closes the store if it was opened. */
  close(): Promise<void>;
}

/**
 * A {@link Store} that `open`s the real one at its first call (every Store method returns a
 * promise). A command parses and checks its arguments before it calls the store: one whose
 * arguments are refused (a typo'd subcommand, a bad amount) opens nothing, so it neither creates
 * a database where none was (nor migrates a PostgreSQL one) nor uses up the "created a new
 * database" warning that a command run from the wrong folder relies on. Optional Store members
 * (`runAlone`) read as present: the admin commands call none.
 */
export function openStoreLazily(open: () => Promise<Store>): LazyStore {
  let opening: Promise<Store> | undefined;
  let opened: Store | undefined;
  let openError: unknown;
  const ensureOpen = (): Promise<Store> =>
    (opening ??= open().then(
      (store) => {
        opened = store;
        return store;
      },
      (error: unknown) => {
        openError = error;
        throw error;
      },
    ));
  const store = new Proxy({} as Store, {
    get(_target, name) {
      if (typeof name !== "string" || name === "then") return undefined;
      return async (...args: unknown[]) => {
        const real = (await ensureOpen()) as unknown as Record<string, (...values: unknown[]) => unknown>;
        return real[name]?.(...args);
      };
    },
  });
  return {
    store,
    get openError() {
      return openError;
    },
    async close() {
      if (opening === undefined) return;
      await opening.catch(() => {});
      await opened?.close();
    },
  };
}
