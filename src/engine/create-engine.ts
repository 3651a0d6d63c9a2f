import type { CatalogModel } from "../catalog/catalog.ts";
import type { ChatEngine, EngineContext } from "./engine.ts";
import { createLlamaEngine } from "./llama/create-llama-engine.ts";
import { createOpenAiEngine } from "./openai/create-openai-engine.ts";

/** Logger shape the engines use (pino's). */
export interface EngineLogger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
}

/** The engine for one catalogue model: the one place that knows which engine types exist. */
export function createEngine(
  model: CatalogModel,
  logger: EngineLogger,
  context?: EngineContext,
): ChatEngine | undefined {
  const engine = model.engine;
  if (engine === undefined) return undefined;
  switch (engine.type) {
    case "llama":
      return createLlamaEngine({ model, logger });
    case "openai":
      return createOpenAiEngine({ model, logger, resolveEngine: context?.resolveEngine });
    default: {
      const unreachable: never = engine;
      throw new Error(`unknown engine ${JSON.stringify(unreachable)}`);
    }
  }
}
