import { createHash } from "node:crypto";
import type { GbnfJsonSchema, Llama, LlamaGrammar } from "node-llama-cpp";
import { createJsonGrammar } from "./create-json-grammar.ts";

/** JSON-schema grammars by schema, so a schema that clients send again is compiled once. */
export interface GrammarCache {
  /** The grammar that constrains output to `schema` (already converted to node-llama-cpp's subset). */
  get(schema: GbnfJsonSchema): Promise<LlamaGrammar>;
}

/**
 * Creates a {@link GrammarCache}: grammars keyed by the SHA-256 of the schema's JSON text, the
 * least recently used dropped beyond `maxEntries`. A grammar that fails to build is not kept.
 */
export function createGrammarCache(options: { llama: Llama; maxEntries?: number }): GrammarCache {
  const maxEntries = options.maxEntries ?? 128;
  const grammars = new Map<string, Promise<LlamaGrammar>>();
  return {
    get(schema) {
      const key = createHash("sha256").update(JSON.stringify(schema)).digest("hex");
      const cached = grammars.get(key);
      if (cached !== undefined) {
        grammars.delete(key);
        grammars.set(key, cached);
        return cached;
      }
      const created = createJsonGrammar(options.llama, schema);
      grammars.set(key, created);
      created.catch(() => {
        if (grammars.get(key) === created) grammars.delete(key);
      });
      for (const oldest of grammars.keys()) {
        if (grammars.size <= maxEntries) break;
        grammars.delete(oldest);
      }
      return created;
    },
  };
}
