import { isDeepStrictEqual } from "node:util";
import type { CatalogModel } from "../catalog/catalog.ts";

/**
 * The settings that give `after` a new engine where `before` had one, as the config file names
 * them (`engine.model`, `engine.max_queue`, `context_length`), in a stable order; never their
 * values (an endpoint's `api_key`, a URL with a token). Empty when none changed: the engine was
 * rebuilt for another reason (a local model's file replaced at the same path).
 */
export function listChangedEngineSettings(before: CatalogModel, after: CatalogModel): string[] {
  const changed: string[] = [];
  if (before.contextLength !== after.contextLength) changed.push("context_length");
  const old: Record<string, unknown> = { ...before.engine };
  const next: Record<string, unknown> = { ...after.engine };
  for (const key of [...new Set([...Object.keys(old), ...Object.keys(next)])].sort()) {
    if (!isDeepStrictEqual(old[key], next[key])) changed.push(`engine.${toSnakeCase(key)}`);
  }
  return changed;
}

/** `maxQueue` as the config file writes it: `max_queue`. */
function toSnakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}
