import type { CatalogModel } from "../catalog/catalog.ts";
import type { ChatEngine } from "./engine.ts";
import { createLlamaEngine } from "./llama/create-llama-engine.ts";
import { createUnavailableEngine } from "./unavailable-engine.ts";

/** Logger shape the engines use (pino's). */
export interface EngineLogger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
}

/** The engine for one catalogue model: the one place that knows which engine types exist. */
export function createEngine(model: CatalogModel, logger: EngineLogger): ChatEngine | undefined {
  const engine = model.engine;
  if (engine === undefined) return undefined;
  switch (engine.type) {
    case "llama":
      return createLlamaEngine({ model, logger });
    case "openai":
      return createUnavailableEngine(
        model,
        `The model '${model.id}' routes to an upstream server, which this version of Tollgate does not support yet.`,
      );
    default: {
      const unreachable: never = engine;
      throw new Error(`unknown engine ${JSON.stringify(unreachable)}`);
    }
  }
}
