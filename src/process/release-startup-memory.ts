import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** The options of V8's `gc()` this module uses (its gc extension's; see below). */
type CollectGarbage = (options: { type: "major"; execution: "sync"; flavor: "last-resort" }) => void;

/**
 * Gives back the memory that starting took and no longer holds, once, as the server begins to
 * serve: one collection of everything, of the kind V8 runs before it gives up for want of memory
 * (`last-resort`: it also shrinks the young generation).
 *
 * Starting allocates a lot that does not last (Node strips the types of some 300 source files,
 * the config is parsed and checked, the store migrated): V8 grows its young generation to 32 MB
 * for it (26 MB of it resident), and nothing shrinks it again while the server sits idle. Without
 * this an idle server with one upstream model held 148-152 MB of RSS (SPEC section 10: under 150);
 * after it, 116 MB. The collection blocks the event loop for about 100-200 ms on this machine, once,
 * before the server's first requests (a readiness probe or load balancer has not sent any yet).
 *
 * V8 gives scripts `gc()` only with `--expose-gc`: the flag set now applies to contexts made from
 * now on, so the function comes from a new one. Where it is missing or refuses the options (another
 * V8), nothing happens: this only saves memory.
 */
export function releaseStartupMemory(): void {
  try {
    setFlagsFromString("--expose-gc");
    const collect = runInNewContext("gc") as CollectGarbage | undefined;
    collect?.({ type: "major", execution: "sync", flavor: "last-resort" });
  } catch {
    // Memory only: the server serves the same without it.
  }
}
