import type { CatalogModel, EngineConfig } from "../catalog/catalog.ts";
import type { ChatEngine, EngineContext } from "./engine.ts";
import type { createLlamaEngine } from "./llama/create-llama-engine.ts";
import type { createOpenAiEngine } from "./openai/create-openai-engine.ts";
import { UpstreamCounts } from "./openai/upstream-counts.ts";

/** Logger shape the engines use (pino's). */
export interface EngineLogger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
  /** `log_level: debug` lines; asked for only where {@link isLevelEnabled} says they are written. */
  debug?(object: object, message?: string): void;
  isLevelEnabled?(level: string): boolean;
}

/**
 * The engine modules imported so far. Each is imported the first time a catalogue has a model of
 * its type ({@link loadEngineModules}), so a server pays only for the engines it serves with: the
 * upstream engine brings undici, the local one its generation code (node-llama-cpp itself waits
 * until a model file is there, see `llama/load-llama-model.ts`).
 */
const factories: { llama?: typeof createLlamaEngine; openai?: typeof createOpenAiEngine } = {};

/**
 * Imports the modules of the engine types `models` use that are not imported yet. Await it before
 * {@link createEngine} is called for these models: at start and before every reload.
 */
export async function loadEngineModules(models: readonly CatalogModel[]): Promise<void> {
  const types = new Set(models.flatMap((model) => (model.engine === undefined ? [] : [model.engine.type])));
  await Promise.all([
    types.has("llama") && factories.llama === undefined
      ? import("./llama/create-llama-engine.ts").then((module) => {
          factories.llama = module.createLlamaEngine;
        })
      : undefined,
    types.has("openai") && factories.openai === undefined
      ? import("./openai/create-openai-engine.ts").then((module) => {
          factories.openai = module.createOpenAiEngine;
        })
      : undefined,
  ]);
}

/**
 * The engine for one catalogue model: the one place that knows which engine types exist. Its
 * type's module must have been loaded by {@link loadEngineModules}.
 */
export function createEngine(
  model: CatalogModel,
  logger: EngineLogger,
  context?: EngineContext,
): ChatEngine | undefined {
  const engine = model.engine;
  if (engine === undefined) return undefined;
  switch (engine.type) {
    case "llama": {
      const create = requireLoaded(factories.llama, engine.type);
      return create({ model, logger });
    }
    case "openai": {
      const create = requireLoaded(factories.openai, engine.type);
      // The model's counts under this catalogue: an engine a reload makes for it goes on counting
      // where the one it replaces stopped.
      return create({
        model,
        logger,
        resolveEngine: context?.resolveEngine,
        holdEngine: context?.holdEngine,
        counts: UpstreamCounts.of(context, model.id),
      });
    }
    default: {
      const unreachable: never = engine;
      throw new Error(`unknown engine ${JSON.stringify(unreachable)}`);
    }
  }
}

function requireLoaded<Factory>(factory: Factory | undefined, type: EngineConfig["type"]): Factory {
  if (factory === undefined) {
    throw new Error(`the ${type} engine is not loaded: await loadEngineModules(models) before createEngine`);
  }
  return factory;
}
