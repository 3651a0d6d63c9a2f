/**
 * A preload (`node --import`) that records the npm packages a process loads and, when it exits,
 * prints them as one line on stderr: `loaded packages: ["fastify",...]`. The startup tests use it
 * to check that a server loads only the packages its configuration needs.
 */
import { writeSync } from "node:fs";
import { registerHooks } from "node:module";

export const LOADED_PACKAGES_PREFIX = "loaded packages: ";

const packages = new Set<string>();

registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context);
    const name = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(resolved.url)?.[1];
    if (name !== undefined) packages.add(name);
    return resolved;
  },
});

process.on("exit", () => {
  // Synchronous: nothing asynchronous runs once the process exits.
  writeSync(2, `${LOADED_PACKAGES_PREFIX}${JSON.stringify([...packages].sort())}\n`);
});
