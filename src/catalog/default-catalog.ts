/**
 * The built-in catalogue, used when no configuration file is found (and when a file has no
 * `models` key): one real small instruct model, served locally and downloaded on first use.
 */
import type { CatalogModel } from "./catalog.ts";
import { DEFAULT_MAX_QUEUE, DEFAULT_OWNED_BY, DEFAULT_PARALLEL } from "./config-defaults.ts";

/** The id of the built-in model. */
export const DEFAULT_MODEL_ID = "qwen2.5-0.5b-instruct";

/** Where the built-in model's GGUF comes from (Qwen2.5 0.5B Instruct, Q4_K_M, about 0.5 GB). */
export const DEFAULT_MODEL_URI = "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M";

/** `created` of the built-in model: a constant (2024-09-19T00:00:00Z, the model's release). */
export const DEFAULT_CATALOG_CREATED = 1_726_704_000;

/** A fresh copy of the built-in catalogue (callers may change it freely). */
export function createDefaultCatalog(): CatalogModel[] {
  return [
    {
      id: DEFAULT_MODEL_ID,
      kind: "chat",
      ownedBy: DEFAULT_OWNED_BY,
      pricing: { kind: "chat", inputPerMillion: "0.10", outputPerMillion: "0.40" },
      contextLength: 8192,
      created: DEFAULT_CATALOG_CREATED,
      engine: {
        type: "llama",
        model: DEFAULT_MODEL_URI,
        parallel: DEFAULT_PARALLEL,
        maxQueue: DEFAULT_MAX_QUEUE,
        threads: undefined,
        gpu: "auto",
      },
    },
  ];
}
