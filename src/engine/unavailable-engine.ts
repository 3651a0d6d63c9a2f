import type { CatalogModel } from "../catalog/catalog.ts";
import { AppError } from "../errors/app-error.ts";
import type { ChatEngine } from "./engine.ts";

/** An engine for a model that cannot be served here: listed as unavailable, requests get 503. */
export function createUnavailableEngine(model: CatalogModel, reason: string): ChatEngine {
  return {
    contextLength: model.contextLength,
    supportsMultipleChoices: false,
    status: () => "unavailable",
    prepare: async () => {
      throw new AppError("model_unavailable", reason);
    },
    close: async () => {},
  };
}
