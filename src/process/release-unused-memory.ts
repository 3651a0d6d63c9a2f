import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** The options of V8's `gc()` this module uses (its gc extension's; see below). */
type CollectGarbage = (options: { type: "major"; execution: "sync"; flavor: "last-resort" }) => void;

/**
 * Gives back the memory the process holds and no longer uses: one collection of everything, of
 * the kind V8 runs before it gives up for want of memory (`last-resort`: it also shrinks the
 * young generation, which nothing else shrinks).
 *
 * V8 grows its young generation for a burst of allocation and keeps it: starting (Node strips
 * the types of some 300 source files, the config is parsed and checked, the store migrated)
 * leaves 32 MB of it (26 MB resident), which V8 shrinks only once allocation runs fast and then
 * slows down (its memory reducer, as after a burst of requests), not in a server that starts and
 * then sits idle. Without this an idle server with one upstream model held 148-152 MB of RSS
 * (SPEC section 10: under 150); after it, 116-117 MB. The collection blocks the event loop for
 * 50-200 ms on this machine: a server runs it once, before it listens.
 *
 * V8 gives scripts `gc()` only with `--expose-gc`: the flag set now applies to contexts made from
 * now on (the main context never gets a `gc`), so the function comes from a new one. Where it is
 * missing or refuses the options (another V8), nothing happens: this only saves memory.
 */
export function releaseUnusedMemory(): void {
  try {
    setFlagsFromString("--expose-gc");
    const collect = runInNewContext("gc") as CollectGarbage | undefined;
    collect?.({ type: "major", execution: "sync", flavor: "last-resort" });
  } catch {
    // Memory only: the server serves the same without it.
  }
}
