import type { ChatEngine } from "../engine/engine.ts";

/** How often a replaced engine is checked for idleness before it is closed. */
export const IDLE_CHECK_MS = 1000;
/** The longest a replaced engine that cannot report its load is kept before it is closed. */
export const MAX_RETIREMENT_MS = 15 * 60_000;

/**
 * Retires an engine a reload replaced, so that requests still waiting for their turn on it may
 * move to the model's new engine (ChatEngine.retire), and closes it once it runs nothing, nothing waits for it and no request
 * holds it; one that cannot report its load after {@link MAX_RETIREMENT_MS}. One that can is
 * never cut short: a reload drops no request in flight, however long it runs (a stream of an
 * hour, a deep queue on a slow machine). `isHeld`: whether a request started on it and
 * has not ended (ModelRegistry.hold): the engine's own load counts a request only while the
 * engine has it, not while it waits between the engine's steps for its rate limit or its
 * reservation (a database round trip on PostgreSQL), and closing then failed it with a 503.
 */
export function closeWhenIdle(
  engine: ChatEngine,
  options: {
    isHeld: (engine: ChatEngine) => boolean;
    onError: (error: unknown) => void;
    /** Once it has closed (or failed to). */
    onClosed?: () => void;
  },
): void {
  const retiredAt = Date.now();
  engine.retire?.();
  const check = () => {
    const load = engine.load?.();
    const idle = load !== undefined && load.running === 0 && load.waiting === 0 && !options.isHeld(engine);
    if (idle || (load === undefined && Date.now() - retiredAt >= MAX_RETIREMENT_MS)) {
      engine
        .close()
        .catch(options.onError)
        .finally(() => options.onClosed?.());
      return;
    }
    setTimeout(check, IDLE_CHECK_MS).unref();
  };
  check();
}
