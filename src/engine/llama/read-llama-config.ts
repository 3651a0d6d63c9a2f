import type { CatalogModel, LlamaEngineConfig } from "../../catalog/catalog.ts";

/** The llama engine settings of a catalogue model; a model served by another engine is a bug. */
export function readLlamaConfig(model: CatalogModel): LlamaEngineConfig {
  if (model.engine?.type !== "llama") {
    throw new Error(`createLlamaEngine needs a model with a llama engine; '${model.id}' has none`);
  }
  return model.engine;
}
