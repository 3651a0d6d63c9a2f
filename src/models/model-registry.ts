import type { CatalogModel } from "../catalog/catalog.ts";
import type { ChatEngine, ModelStatus } from "../engine/engine.ts";

/** A catalogue model with the engine that serves it, if any. */
export interface RegisteredModel {
  model: CatalogModel;
  /** `undefined` for models nothing serves here (image and embedding models, for now). */
  engine: ChatEngine | undefined;
}

/**
 * Creates the engine for one catalogue model; `undefined` when it has none. `resolveEngine` finds
 * another model's engine when asked (upstream fallbacks), so the order of the models does not matter.
 */
export type CreateEngine = (
  model: CatalogModel,
  context: { resolveEngine: (id: string) => ChatEngine | undefined },
) => ChatEngine | undefined;

/** The catalogue as the service runs it: models by id, each with its engine. */
export class ModelRegistry {
  readonly #models = new Map<string, RegisteredModel>();

  constructor(models: readonly CatalogModel[], createEngine: CreateEngine) {
    const context = { resolveEngine: (id: string) => this.#models.get(id)?.engine };
    for (const model of models) this.#models.set(model.id, { model, engine: createEngine(model, context) });
  }

  get(id: string): RegisteredModel | undefined {
    return this.#models.get(id);
  }

  list(): RegisteredModel[] {
    return [...this.#models.values()];
  }

  /** Closes every engine (in-flight requests are aborted). */
  async close(): Promise<void> {
    await Promise.all(this.list().map((entry) => entry.engine?.close()));
  }
}

/** A model's readiness: its engine's, or `unavailable` where nothing serves it. */
export function getModelStatus(entry: RegisteredModel): ModelStatus {
  return entry.engine?.status() ?? "unavailable";
}

/** The context length reported and enforced: the engine's (capped at the file's), else the catalogue's. */
export function getContextLength(entry: RegisteredModel): number | undefined {
  return entry.engine?.contextLength ?? entry.model.contextLength;
}
